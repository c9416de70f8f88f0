// Loom keyboard and small behaviours. All text comes from the server already
// escaped inside htmx fragments; nothing here writes model text as HTML.
(() => {
  const reader = () => document.getElementById("loom-reader");
  const csrf = () => {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"]; }
    catch (e) { return ""; }
  };
  const swapReader = (verb, url, values) =>
    htmx.ajax(verb, url, { target: "#loom-reader", swap: "outerHTML", values: values || {},
                           headers: { "X-CSRFToken": csrf() } });

  function go(nodeId) {
    const r = reader();
    if (!r || !nodeId) return;
    const url = r.dataset.nodeUrl.replace(/\/0\/$/, `/${nodeId}/`);
    swapReader("GET", url).then(() => history.pushState({ loom: nodeId }, "", url));
  }
  const act = (name, values) => {
    const r = reader();
    swapReader("POST", r.dataset.actionUrl.replace("ACTION", name), values);
  };
  const openDialog = (id) => {
    const d = document.getElementById(id);
    if (!d) return;
    d.showModal();
    const field = d.querySelector("textarea, input");
    if (field) field.focus();
  };
  const generate = () => {
    const form = document.getElementById("generate-form");
    if (form) htmx.trigger(form, "submit");
  };

  const keys = {
    ArrowLeft: () => go(reader().dataset.parent),
    ArrowRight: () => go(reader().dataset.child),
    ArrowUp: () => go(reader().dataset.prev),
    ArrowDown: () => go(reader().dataset.next),
    r: () => go(reader().dataset.root),
    g: generate,
    e: () => openDialog("edit-dialog"),
    h: () => openDialog("child-dialog"),
    b: () => act("bookmark"),
    x: () => { if (reader().dataset.parent) act("archive"); },
    t: () => { const t = document.getElementById("tag-input"); if (t) t.focus(); },
    Backspace: () => { if (reader().dataset.parent) act("delete"); },
    z: () => swapReader("POST", reader().dataset.undoUrl),
    d: () => swapReader("GET", reader().dataset.bookmarkUrl.replace("DIR", "next")),
    a: () => swapReader("GET", reader().dataset.bookmarkUrl.replace("DIR", "prev")),
    "/": () => { const q = document.getElementById("tree-q"); if (q) q.focus(); },
    "?": () => { const d = document.getElementById("key-help"); if (d.open) d.close(); else d.showModal(); },
  };

  const typing = (el) =>
    el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));

  document.addEventListener("keydown", (ev) => {
    if (!reader() || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (typing(ev.target) || document.querySelector("dialog[open]:not(#key-help)")) return;
    const handler = keys[ev.key];
    if (!handler) return;
    ev.preventDefault();
    handler();
  });

  document.addEventListener("click", (ev) => {
    const t = ev.target;
    if (t.closest("[data-key-help]")) { keys["?"](); return; }
    if (t.closest("[data-close]")) { t.closest("dialog").close(); return; }
    const action = t.closest("[data-act]");
    if (action && !action.hasAttribute("hx-post")) {
      const name = action.dataset.act;
      if (name === "generate") generate();
      if (name === "edit") openDialog("edit-dialog");
      if (name === "child") openDialog("child-dialog");
      return;
    }
    const split = t.closest("[data-split]");
    if (split) {
      const form = split.form;
      form.querySelector("[name=offset]").value = form.querySelector("textarea").selectionStart;
      return;
    }
    // Segments of the path and outline links navigate in place.
    if (t.closest(".seg.current .tok[data-alts]")) return;
    const link = t.closest("a.go, .seg[data-id]");
    if (link && reader() && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey) {
      ev.preventDefault();
      go(link.dataset.id);
    }
  });

  // An alternative picked in the token popover (static/weft/tokens.js): a sibling of
  // that segment's node, with the text up to the token and then the alternative.
  document.addEventListener("weft:branch", (ev) => {
    const seg = ev.detail.chip.closest("[data-branch-url]");
    if (!seg || !reader()) return;
    swapReader("POST", seg.dataset.branchUrl, { index: ev.detail.index, token: ev.detail.alt });
  });

  // Dialogs live inside the reader; a swap replaces them, so close first.
  document.addEventListener("htmx:beforeSwap", () => {
    document.querySelectorAll("#loom-reader dialog[open]").forEach((d) => d.close());
  });
  document.addEventListener("htmx:afterSwap", () => {
    const cur = document.getElementById("current-seg");
    if (cur) cur.scrollIntoView({ block: "nearest" });
  });
  window.addEventListener("popstate", () => location.reload());
  document.addEventListener("DOMContentLoaded", () => {
    const cur = document.getElementById("current-seg");
    if (cur) cur.scrollIntoView({ block: "nearest" });
  });
})();
