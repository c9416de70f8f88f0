// Small page behaviours shared by every page. Generated text never passes
// through innerHTML here: the server escapes it and htmx swaps the fragments.
document.addEventListener("htmx:wsOpen", () => {
  const dot = document.getElementById("live-dot");
  if (dot) dot.classList.add("on");
});
document.addEventListener("htmx:wsClose", () => {
  const dot = document.getElementById("live-dot");
  if (dot) dot.classList.remove("on");
});
