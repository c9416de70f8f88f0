// Read mode (templates/loom/read.html): model colours on or off (remembered in this
// browser), print, and w or Escape back to writing at the end of the text.
const KEY = "weft.read.colours";
const text = () => document.getElementById("read-text");
function colours(on) {
  document.body.classList.toggle("read-colours", on);
  const box = document.getElementById("read-colours");
  if (box) box.checked = on;
}
document.addEventListener("DOMContentLoaded", () => colours(localStorage.getItem(KEY) === "1"));
document.addEventListener("change", (ev) => {
  if (ev.target.id !== "read-colours") return;
  colours(ev.target.checked);
  localStorage.setItem(KEY, ev.target.checked ? "1" : "0");
});
document.addEventListener("click", (ev) => { if (ev.target.closest("[data-print]")) window.print(); });
document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || !text()) return;
  if (["INPUT", "TEXTAREA", "SELECT"].includes(ev.target.tagName)) return;
  if (ev.key === "w" || ev.key === "Escape") {
    ev.preventDefault();
    location.href = document.getElementById("read-back").href;
  }
});
