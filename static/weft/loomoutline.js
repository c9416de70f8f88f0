// The whole-tree outline (templates/loom/_outline.html): the WAI-ARIA tree
// pattern. One item is focusable at a time (roving tabindex); ↑ ↓ move over
// the visible items, → opens (loading the children on first open) or steps
// in, ← closes or steps out, Home/End jump, Enter goes there in the reader.
// The outline is re-rendered with each reader swap, so state lives in the DOM (the
// partial's script tag comes again with each swap; a module runs once).
let refocus = false;

const tree = () => document.getElementById("loom-outline");
const visible = () =>
  [...tree().querySelectorAll('[role="treeitem"]')].filter(
    (li) => !li.parentElement.closest('[role="treeitem"][aria-expanded="false"]'),
  );

function focusItem(li) {
  if (!li) return;
  tree().querySelectorAll('[role="treeitem"][tabindex="0"]').forEach((o) => (o.tabIndex = -1));
  li.tabIndex = 0;
  li.focus();
}

async function open(li) {
  if (li.getAttribute("aria-expanded") !== "false") return;
  if (!li.querySelector(':scope > [role="group"]')) {
    const url = tree().dataset.childrenUrl.replace("/0/", `/${li.dataset.id}/`);
    const level = li.getAttribute("aria-level");
    const response = await fetch(`${url}?level=${level}`, { headers: { "HX-Request": "true" } });
    if (!response.ok) return;
    const group = document.createElement("ul");
    group.setAttribute("role", "group");
    group.innerHTML = await response.text(); // our own template's escaped HTML
    li.appendChild(group);
  }
  li.setAttribute("aria-expanded", "true");
}

function close(li) {
  if (li.getAttribute("aria-expanded") === "true") li.setAttribute("aria-expanded", "false");
}

function go(li) {
  const link = li.querySelector(":scope > .oi-row > a.go");
  refocus = true;
  link.click(); // static/weft/loom.js swaps the reader in place
}

// Captured at the document, before loom.js's reader keys see the event.
document.addEventListener(
  "keydown",
  (ev) => {
    const li = ev.target.closest && ev.target.closest('#loom-outline [role="treeitem"]');
    if (!li || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const items = visible();
    const at = items.indexOf(li);
    const expanded = li.getAttribute("aria-expanded");
    const handlers = {
      ArrowDown: () => focusItem(items[at + 1]),
      ArrowUp: () => focusItem(items[at - 1]),
      Home: () => focusItem(items[0]),
      End: () => focusItem(items[items.length - 1]),
      ArrowRight: async () => {
        if (expanded === "false") await open(li);
        else if (expanded === "true") focusItem(li.querySelector('[role="group"] > [role="treeitem"]'));
      },
      ArrowLeft: () => {
        if (expanded === "true") close(li);
        else focusItem(li.parentElement.closest('[role="treeitem"]'));
      },
      Enter: () => go(li),
    };
    const handler = handlers[ev.key];
    ev.stopPropagation(); // the reader's own keys (arrows, letters) stay out of the outline
    if (!handler) return;
    ev.preventDefault();
    handler();
  },
  true,
);

document.addEventListener("click", (ev) => {
  const twisty = ev.target.closest && ev.target.closest("#loom-outline .twisty");
  if (!twisty) return;
  const li = twisty.closest('[role="treeitem"]');
  if (li.getAttribute("aria-expanded") === "true") close(li);
  else open(li);
  focusItem(li);
});

document.addEventListener("htmx:afterSwap", () => {
  if (!refocus || !tree()) return;
  refocus = false;
  const current = tree().querySelector('[aria-current="true"]');
  if (current) current.focus();
});
