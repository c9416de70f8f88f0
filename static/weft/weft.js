// Small page behaviours shared by every page. Generated text never passes
// through innerHTML here: the server escapes it and htmx swaps the fragments.
// The layout's dot follows its own socket (/ws/ping/), not a page's (a generation's
// closes when it ends).
for (const [name, on] of [["htmx:wsOpen", true], ["htmx:wsClose", false]]) {
  document.addEventListener(name, (e) => {
    const dot = document.getElementById("live-dot");
    if (dot && e.target.contains(dot)) dot.classList.toggle("on", on);
  });
}

// Copy to the clipboard (with a fallback for plain-http origins, where the
// Clipboard API is missing). Any <button data-copy-target="id"> copies that
// element's text; pages import copy(text, button) for anything else.
export async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const area = document.createElement("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  const label = button.textContent;
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = label; }, 1200);
}
document.addEventListener("click", (e) => {
  const b = e.target.closest("[data-copy-target]");
  if (b) copy(document.getElementById(b.dataset.copyTarget).textContent, b);
});

// Plain view: the token views' colours off (or on) at once on this page, and saved for
// the user (every page, every browser: the server renders the body's class).
document.addEventListener("change", (e) => {
  const box = e.target.closest && e.target.closest("input[data-plain-view]");
  if (!box) return;
  document.body.classList.toggle("plain-view", box.checked);
  document.querySelectorAll("input[data-plain-view]").forEach((b) => { b.checked = box.checked; });
  const token = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
  fetch(box.dataset.plainView, {
    method: "POST", credentials: "same-origin",
    headers: { "X-CSRFToken": token, "HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded" },
    body: box.checked ? "plain=1" : "plain=",
  });
});
