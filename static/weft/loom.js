// Loom keyboard, the editable text and small behaviours. All text comes from the
// server already escaped inside htmx fragments; nothing here writes model text as
// HTML (what the user types is read back as text and sent as form values).
import { startLive } from "./loomlive.js";

const reader = () => document.getElementById("loom-reader");
const doc = () => document.getElementById("loom-doc");
const csrf = () => {
  try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"]; }
  catch (e) { return ""; }
};
// An explicit source: without one htmx takes the focused element, which may be a
// popover button just removed (and then sends nothing).
const swapReader = (verb, url, values, source) =>
  htmx.ajax(verb, url, { target: "#loom-reader", swap: "outerHTML", values: values || {},
                         source: source || reader(), headers: { "X-CSRFToken": csrf() } });

// --- notices: one strip above the reader (#loom-notices), one notice at a time ----------
const NOTICE_MS = 8000;
function arm(el) {
  if (el.dataset.armed || el.classList.contains("error")) return;  // errors stay until dismissed
  el.dataset.armed = "1";
  setTimeout(() => el.remove(), NOTICE_MS);
}
function toast(text, kind) {
  const box = document.getElementById("loom-notices");
  if (!box) return;
  const el = document.createElement("div");
  el.className = `toast ${kind || "notice"}`;
  if (kind === "error") el.setAttribute("role", "alert");
  el.textContent = text;
  const close = document.createElement("button");
  close.type = "button";
  close.className = "linkish toast-close";
  close.setAttribute("aria-label", "Dismiss");
  close.textContent = "×";
  el.append(close);
  box.replaceChildren(el);
  arm(el);
}
const armAll = () => document.querySelectorAll("#loom-notices .toast").forEach(arm);

// --- the editable text ---------------------------------------------------------------
// Each segment's text as the server sent it, to tell what the user changed. Chips
// that stand for no text (a stop token) are not part of it and cannot be edited.
let baseline = new Map();
let versions = new Map();  // each segment's node version as shown: what an edit is based on
let shownDoc = null;  // the element baseline describes (a refused save keeps it)
const isExtra = (n) => n.parentElement && n.parentElement.closest(".tok.extra");

function textNodes(root) {
  const out = [];
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) if (!isExtra(walk.currentNode)) out.push(walk.currentNode);
  return out;
}
const textOf = (el) => textNodes(el).map((n) => n.data).join("");

function initDoc() {
  const d = doc();
  baseline = new Map();
  versions = new Map();
  shownDoc = d;
  if (!d) return;
  d.querySelectorAll(".tok.extra").forEach((el) => { el.contentEditable = "false"; });
  d.querySelectorAll(".seg[data-id]").forEach((s) => {
    baseline.set(s.dataset.id, textOf(s));
    if (s.dataset.v) versions.set(s.dataset.id, Number(s.dataset.v));
  });
  showWriteBar(false);
}

// The text per segment now: a text node outside every segment (typed where the
// browser put no span) belongs to the segment before it.
function currentTexts() {
  const d = doc();
  const texts = new Map([...baseline.keys()].map((id) => [id, ""]));
  let last = [...baseline.keys()][0];
  for (const n of textNodes(d)) {
    const seg = n.parentElement.closest(".seg[data-id]");
    const id = seg && d.contains(seg) ? seg.dataset.id : last;
    if (id === undefined) continue;
    last = id;
    texts.set(id, (texts.get(id) || "") + n.data);
  }
  return texts;
}

// What to send: segments whose text changed, and what was written after the end.
function changes() {
  if (!doc()) return { edits: [], append: "" };
  const texts = currentTexts();
  const ids = [...baseline.keys()];
  const end = ids[ids.length - 1];
  const edits = [];
  let append = "";
  for (const id of ids) {
    const was = baseline.get(id);
    const now = texts.get(id);
    if (now === was) continue;
    if (id === end && now.startsWith(was)) append = now.slice(was.length);
    else edits.push({ node: Number(id), text: now, version: versions.get(id) });
  }
  return { edits, append };
}
const dirty = () => { const c = changes(); return c.edits.length > 0 || c.append !== ""; };

function showWriteBar(on) {
  const bar = document.getElementById("write-bar");
  if (bar) bar.hidden = !on;
}

function write(generate) {
  const r = reader();
  const c = changes();
  const values = { edits: c.edits.length ? JSON.stringify(c.edits) : "", append: c.append,
                   generate: generate ? "1" : "" };
  const form = generate ? document.getElementById("generate-form") : r;
  // After Save the caret stays to write on; after Generate the keys are free again
  // (n goes to the newest child).
  return swapReader("POST", r.dataset.writeUrl, values, form).then(() => { if (generate) leaveDoc(); });
}
// htmx gives the focus back to an element of the same id after a swap.
const leaveDoc = () => { if (inDoc(document.activeElement)) document.activeElement.blur(); };

function enterDoc() {
  const d = doc();
  if (!d) return;
  editOn();
  d.focus();
  const range = document.createRange();
  range.selectNodeContents(d);
  range.collapse(false);
  const sel = getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}

// The segment and character offset of the caret in the text.
function caret() {
  const sel = getSelection();
  const d = doc();
  if (!d || !sel.rangeCount || !d.contains(sel.anchorNode)) return null;
  const node = sel.anchorNode;
  const el = node.nodeType === Node.TEXT_NODE ? node.parentElement : node;
  const seg = el.closest(".seg[data-id]");
  if (!seg) return null;
  const before = document.createRange();
  before.selectNodeContents(seg);
  before.setEnd(node, sel.anchorOffset);
  const frag = before.cloneContents();
  frag.querySelectorAll(".tok.extra").forEach((x) => x.remove());
  return { id: seg.dataset.id, offset: frag.textContent.length };
}

function splitAtCaret() {
  const at = caret();
  if (!at) { toast("Put the caret inside the text where the split should go.", "error"); return; }
  if (dirty()) { toast("Save or discard your changes to the text first.", "error"); return; }
  const r = reader();
  const url = r.dataset.actionUrl.replace(`/${r.dataset.node}/ACTION/`, `/${at.id}/split/`);
  const version = versions.get(at.id);
  swapReader("POST", url, { offset: at.offset, focus: r.dataset.node, version: version || "" })
    .then(leaveDoc);
}

// --- navigation and keys ----------------------------------------------------------------
const urlOf = (nodeId) => reader().dataset.nodeUrl.replace(/\/0\/$/, `/${nodeId}/`);
// One history entry per move, pushed at once (Back then takes one press); the reader
// follows. Any other swap that shows another node replaces the address (syncUrl).
function go(nodeId) {
  const r = reader();
  if (!r || !nodeId) return;
  if (dirty()) { toast("Save or discard your changes to the text first.", "error"); return; }
  const url = urlOf(nodeId);
  if (location.pathname !== url) history.pushState({ loom: String(nodeId) }, "", url);
  swapReader("GET", url);
}
let stepping = false;  // d / a: a move too, so it gets its own history entry
function syncUrl() {
  const r = reader();
  if (!r) return;
  const url = urlOf(r.dataset.node);
  if (location.pathname !== url) {
    if (stepping) history.pushState({ loom: r.dataset.node }, "", url);
    else history.replaceState({ loom: r.dataset.node }, "", url);
  }
  stepping = false;
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
  if (dirty()) { write(true); return; }
  const form = document.getElementById("generate-form");
  if (form) htmx.trigger(form, "submit");
};

const keys = {
  ArrowLeft: () => go(reader().dataset.parent),
  ArrowRight: () => go(reader().dataset.child),
  ArrowUp: () => go(reader().dataset.prev),
  ArrowDown: () => go(reader().dataset.next),
  n: () => go(reader().dataset.newest),
  r: () => go(reader().dataset.root),
  g: generate,
  Enter: enterDoc,
  s: splitAtCaret,
  e: () => openDialog("edit-dialog"),
  h: () => openDialog("child-dialog"),
  b: () => act("bookmark"),
  o: () => act("hoist"),
  x: () => { if (reader().dataset.parent) act("archive"); },
  t: () => { const t = document.getElementById("tag-input"); if (t) t.focus(); },
  Backspace: () => { if (reader().dataset.parent) act("delete"); },
  z: () => swapReader("POST", reader().dataset.undoUrl),
  y: () => swapReader("POST", reader().dataset.redoUrl),
  d: () => { stepping = true; swapReader("GET", reader().dataset.bookmarkUrl.replace("DIR", "next")); },
  a: () => { stepping = true; swapReader("GET", reader().dataset.bookmarkUrl.replace("DIR", "prev")); },
  m: () => { if (reader().dataset.parent) act("merge", { version: reader().dataset.version }); },
  "+": () => act("rate", { value: "up" }),
  "-": () => act("rate", { value: "down" }),
  "/": () => { const q = document.getElementById("tree-q"); if (q) q.focus(); },
  v: () => { location.href = reader().dataset.readUrl; },
  "?": () => {
    const d = document.getElementById("key-help");
    if (d.open) { d.close(); return; }
    d.showModal();
    // Opened at its top, heading first (the focus would otherwise go to a control
    // further down and scroll the list past its heading).
    d.scrollTop = 0;
    d.querySelector("h2").focus();
  },
};

const typing = (el) =>
  el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));
const inDoc = (el) => el && el.closest && el.closest("#loom-doc");

// The text is editable while it has the focus (a click, Tab or Enter puts it there)
// and while it holds unsaved changes; otherwise its chips are Tab stops of their own.
function editOn() {
  const d = doc();
  // A viewer's reader is marked read-only: the text is not editable at all.
  if (!d || d.isContentEditable || d.closest("[data-readonly]")) return;
  d.contentEditable = "plaintext-only";
  d.setAttribute("aria-readonly", "false");
}
function editOff() {
  const d = doc();
  if (!d || dirty()) return;
  d.removeAttribute("contenteditable");
  d.setAttribute("aria-readonly", "true");
}
// Before the browser's own mousedown places the caret, so it lands where clicked.
document.addEventListener("mousedown", (ev) => { if (inDoc(ev.target)) editOn(); }, true);
document.addEventListener("focusin", (ev) => { if (ev.target === doc()) editOn(); });
document.addEventListener("focusout", (ev) => { if (ev.target === doc()) editOff(); });

// Keys inside the text: save / save and generate / leave it.
document.addEventListener("keydown", (ev) => {
  if (!inDoc(ev.target)) return;
  if ((ev.ctrlKey || ev.metaKey) && (ev.key === "Enter" || ev.key === "s")) {
    ev.preventDefault();
    write(ev.key === "Enter");
  } else if (ev.key === "Escape" && !document.querySelector(".tok-pop")) {
    ev.target.blur();
  }
});
document.addEventListener("input", (ev) => { if (inDoc(ev.target)) showWriteBar(dirty()); });

document.addEventListener("keydown", (ev) => {
  if (!reader() || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (typing(ev.target) || document.querySelector("dialog[open]:not(#key-help)")) return;
  // The popover has keys of its own; Enter on a button or link presses it.
  if (ev.target.closest(".tok-pop")) return;
  if (ev.key === "Enter" && ev.target.closest("button, a, summary, .tok")) return;
  const handler = keys[ev.key];
  if (!handler) return;
  ev.preventDefault();
  handler();
});

document.addEventListener("click", (ev) => {
  const t = ev.target;
  if (t.closest(".toast-close")) { t.closest(".toast").remove(); return; }
  if (t.closest("[data-key-help]")) { keys["?"](); return; }
  if (t.closest("[data-close]")) { t.closest("dialog").close(); return; }
  const w = t.closest("[data-write]");
  if (w) {
    if (w.dataset.write === "discard") { baseline = new Map(); go(reader().dataset.node); }
    else write(w.dataset.write === "generate");
    return;
  }
  const action = t.closest("[data-act]");
  if (action && !action.hasAttribute("hx-post")) {
    const name = action.dataset.act;
    if (name === "generate") generate();
    if (name === "edit") openDialog("edit-dialog");
    if (name === "child") openDialog("child-dialog");
    if (name === "split") splitAtCaret();
    return;
  }
  // A click in the text puts the caret there; Alt+click goes to that segment's node.
  const seg = t.closest(".seg[data-id]");
  if (seg) {
    if (ev.altKey && reader()) { ev.preventDefault(); go(seg.dataset.id); }
    return;
  }
  const link = t.closest("a.go");
  if (link && reader() && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey) {
    ev.preventDefault();
    go(link.dataset.id);
  }
});
// The split button keeps the caret where it was in the text.
document.addEventListener("mousedown", (ev) => {
  if (ev.target.closest("[data-act=split]")) ev.preventDefault();
});

// The edit dialog's split: the offset is the textarea's caret when the request is
// built (a click handler runs after htmx has read the form).
// The merge button: the node's version as the page has it now (a live update can
// bring a newer one without replacing the button).
document.addEventListener("htmx:configRequest", (ev) => {
  const elt = ev.detail.elt;
  if (elt && elt.hasAttribute && elt.hasAttribute("data-versioned") && reader()) {
    ev.detail.parameters.version = reader().dataset.version;
  }
});
document.addEventListener("htmx:configRequest", (ev) => {
  const elt = ev.detail.elt;
  if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-split")) return;
  const area = elt.form && elt.form.querySelector("textarea");
  if (area) ev.detail.parameters.offset = String(area.selectionStart);
});

// An alternative picked in the token popover (static/weft/tokens.js): a sibling of
// that segment's node, with the text up to the token and then the alternative.
document.addEventListener("weft:branch", (ev) => {
  const seg = ev.detail.chip.closest("[data-branch-url]");
  if (!seg || !reader()) return;
  swapReader("POST", seg.dataset.branchUrl, { index: ev.detail.index, token: ev.detail.alt });
});
// The popover of a model-written token also offers every alternative at once, as
// single-token children (logitloom).
document.addEventListener("weft:popover", (ev) => {
  const { pop, chip } = ev.detail;
  const seg = chip.closest("[data-branch-url]");
  const alts = JSON.parse(chip.dataset.alts || "[]").filter((a) => !a[2]);
  if (!seg || !alts.length || chip.dataset.i === undefined) return;
  const button = document.createElement("button");
  button.type = "button";
  button.className = "pop-extra";
  button.textContent = `Expand all ${alts.length} alternatives as children`;
  button.addEventListener("click", () => {
    const url = seg.dataset.branchUrl.replace(/alternative\/$/, "expand/");
    swapReader("POST", url, { index: chip.dataset.i });
    // Hidden, not removed: tokens.js removes it when the swap takes its chip away.
    pop.hidePopover();
  });
  pop.append(button);
});

// Dialogs live inside the reader; a swap replaces them, so close first.
document.addEventListener("htmx:beforeSwap", (ev) => {
  if (ev.detail.target && ev.detail.target.id === "loom-reader") {
    document.querySelectorAll("#loom-reader dialog[open]").forEach((d) => d.close());
  }
});
document.addEventListener("htmx:afterSwap", () => {
  armAll();
  syncUrl();
  if (!doc() || doc() === shownDoc) return;
  initDoc();
  const cur = document.getElementById("current-seg");
  if (cur) cur.scrollIntoView({ block: "nearest" });
});
document.addEventListener("htmx:oobAfterSwap", () => {
  armAll();
  // A live update replaced the text (static/weft/loomlive.js): it is the new baseline.
  if (doc() && doc() !== shownDoc) initDoc();
  // A change not applied over someone else's: its notice holds both texts and the
  // choices, and a modal dialog would keep them out of reach (the text is in it too).
  if (document.querySelector("#loom-notices .conflict")) {
    document.querySelectorAll("#loom-reader dialog[open]").forEach((d) => d.close());
  }
});
window.addEventListener("beforeunload", (ev) => { if (dirty()) ev.preventDefault(); });
window.addEventListener("popstate", () => location.reload());
// The owner's share dialog: htmx loads its content as it opens (the button's hx-get).
document.addEventListener("click", (ev) => {
  if (ev.target.closest && ev.target.closest("#share-open")) {
    document.getElementById("share-dialog").showModal();
  }
});
document.addEventListener("DOMContentLoaded", () => {
  initDoc();
  const cur = document.getElementById("current-seg");
  if (cur) cur.scrollIntoView({ block: "nearest" });
  // Back from read mode: writing at the end of the text.
  if (location.hash === "#write") {
    history.replaceState(history.state, "", location.pathname);
    enterDoc();
  }
});

// The tree's socket (static/weft/loomlive.js): an update from someone else waits while
// the text holds unsaved changes.
startLive({ unsaved: dirty });
