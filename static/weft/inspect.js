// Inspect: tab switching, colour-mode switching, click-to-pin hover cards. Token text
// is never written here: the server renders (and escapes) every chip and card.
const MODE_KEY = "weft.inspect.colourMode";

// The legend of the mode shown, and only that one.
function showLegend(mode) {
  document.querySelectorAll("[data-legend-mode]").forEach((el) => {
    el.hidden = el.dataset.legendMode !== mode;
  });
}

function applyMode(root) {
  const tokens = root.querySelector("#tokens[data-mode]");
  if (!tokens) return;
  const saved = localStorage.getItem(MODE_KEY);
  if (saved) {
    tokens.dataset.mode = saved;
    const radio = root.querySelector(`input[name="colour-mode"][value="${saved}"]`);
    if (radio) radio.checked = true;
  }
  showLegend(tokens.dataset.mode);
}

function showSource(form) {
  const choice = form.querySelector('input[name="source"]:checked');
  const source = choice ? choice.value : "text";
  form.querySelectorAll("[data-source]").forEach((el) => {
    el.hidden = el.dataset.source !== source;
  });
}

document.addEventListener("change", (event) => {
  const el = event.target;
  if (el.name === "colour-mode") {
    const tokens = document.querySelector("#tokens[data-mode]");
    if (tokens) tokens.dataset.mode = el.value;
    localStorage.setItem(MODE_KEY, el.value);
    showLegend(el.value);
  } else if (el.name === "source" && el.form) {
    showSource(el.form);
  }
});

document.addEventListener("click", (event) => {
  const tab = event.target.closest("[role=tab][data-tab]");
  if (tab) {
    document.querySelectorAll("[role=tab][data-tab]").forEach((t) => {
      t.setAttribute("aria-selected", String(t === tab));
    });
    document.querySelectorAll(".tabpanel").forEach((panel) => {
      panel.hidden = panel.dataset.panel !== tab.dataset.tab;
    });
    return;
  }
  // A click pins a token's card open (touch screens have no hover).
  const tok = event.target.closest(".tok");
  document.querySelectorAll(".tok.open").forEach((t) => {
    if (t !== tok) t.classList.remove("open");
  });
  if (tok) tok.classList.toggle("open");
});

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") {
    document.querySelectorAll(".tok.open").forEach((t) => t.classList.remove("open"));
  }
});

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("form-score");
  if (form) showSource(form);
  applyMode(document);
});
document.addEventListener("htmx:afterSwap", (event) => applyMode(event.detail.target || document));
