// Workbench behaviours: keyboard run, monospace toggle, copy, "branch from here" (from a
// finished sample or a token still streaming), the draft's autosave, the settings
// column's toggle, dismissing runs and picking two to compare.
// Model-written text is only ever set with textContent or .value; the server renders
// every token chip (escaped) and static/weft/tokens.js owns the popover.
import { copy } from "./weft.js";

const $ = (sel, root = document) => root.querySelector(sel);
const editor = () => $("#id_prompt");

// Ctrl/Cmd+Enter runs from anywhere on the page.
document.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
    const run = $("#run-btn");
    if (run && !run.disabled) { e.preventDefault(); run.click(); }
  }
});

document.addEventListener("DOMContentLoaded", () => {
  const mono = $("#mono-toggle");
  const ed = editor();
  if (mono && ed) {
    mono.checked = localStorage.getItem("weft.mono") !== "0";
    ed.classList.toggle("mono", mono.checked);
    mono.addEventListener("change", () => {
      ed.classList.toggle("mono", mono.checked);
      localStorage.setItem("weft.mono", mono.checked ? "1" : "0");
    });
  }
  // A branch made on another page (History) arrives through sessionStorage.
  const pending = sessionStorage.getItem("weft.branch");
  if (pending !== null && ed) {
    sessionStorage.removeItem("weft.branch");
    setPrompt(pending);
  }
});

// The temperature slider (0–5, the common range) and its number field (0–100).
document.addEventListener("input", (e) => {
  if (e.target.id === "temperature-slider") {
    const field = $("#id_temperature");
    if (field) field.value = e.target.value;
  } else if (e.target.id === "id_temperature") {
    const slider = $("#temperature-slider");
    if (slider) slider.value = e.target.value;
  }
});

function setPrompt(text) {
  const ed = editor();
  ed.value = text;
  ed.dispatchEvent(new Event("input", { bubbles: true })); // recount tokens
  ed.focus();
  ed.setSelectionRange(text.length, text.length);
  ed.scrollIntoView({ block: "center" });
}

document.addEventListener("click", (e) => {
  const t = e.target;
  if (t.closest("[data-copy]")) {
    copy(t.closest(".sample").dataset.text, t.closest("[data-copy]"));
  } else if (t.closest("[data-set-max-tokens]")) {
    const field = $("#id_max_tokens");
    field.value = t.closest("[data-set-max-tokens]").dataset.setMaxTokens;
    field.dispatchEvent(new Event("input", { bubbles: true }));
  } else if (t.closest(".run-dismiss")) {
    dismiss(t.closest(".run"));
  } else if (t.closest("#side-toggle")) {
    setSideCollapsed(!$("#wb").classList.contains("side-collapsed"));
  } else if (t.closest("[data-loom-from-editor]")) {
    openInLoom(editor().value);
  }
});

// ------------------------------------------------------------------ the draft
// The form is saved as typed (debounced), and at once when the page is left (a
// beacon survives the unload), so reload, Back and another browser find it again.
// The beacon may land after the page it left for has come Back (or not land): what
// it carries is also kept in this tab (sessionStorage, per user) until a save is
// answered, and a page that loads while it is kept takes it and saves it again.
// Saves are numbered (a random id for this page, then 1, 2, …) and the server keeps
// the newest: a debounced save still in flight when the beacon leaves with newer
// text may be handled last, and must not overwrite it.
const DRAFT_DELAY = 400;
const PENDING_FOR_MS = 10 * 60 * 1000; // older: another browser may have saved since
const DRAFT_PAGE = Array.from(crypto.getRandomValues(new Uint8Array(12)),
                              (b) => b.toString(16).padStart(2, "0")).join("");
let draftSeq = 0;
let draftTimer = null;
let draftDirty = false;

function draftForm() { return $("#wb-form[data-draft-url]"); }

function draftBody(form) {
  const body = new FormData(form);
  for (const name of ["preset_name", "prompt_name"]) body.delete(name); // not settings
  if (form.dataset.showGeneration) body.set("show", form.dataset.showGeneration);
  draftSeq += 1;
  body.set("draft_page", DRAFT_PAGE);
  body.set("draft_seq", String(draftSeq));
  return body;
}

async function saveDraft() {
  const form = draftForm();
  clearTimeout(draftTimer);
  if (!form) return;
  draftDirty = false;
  const body = draftBody(form);
  delete form.dataset.showGeneration; // sent once
  let html;
  try {
    const response = await fetch(form.dataset.draftUrl, { method: "POST", body, credentials: "same-origin" });
    html = await response.text();
    if (!response.ok) draftDirty = true; // try again with the next keystroke
    else forgetPending(form);
  } catch (err) {
    draftDirty = true;
    return;
  }
  const status = $("#draft-status");
  // The server's own (escaped) fragment, no model output in it.
  if (status && html.includes('id="draft-status"')) status.outerHTML = html;
}

function scheduleDraft() {
  if (!draftForm()) return;
  draftDirty = true;
  clearTimeout(draftTimer);
  draftTimer = setTimeout(saveDraft, DRAFT_DELAY);
}

function flushDraft() {
  const form = draftForm();
  if (!form || !draftDirty) return;
  clearTimeout(draftTimer);
  draftDirty = false;
  const body = draftBody(form);
  try {
    sessionStorage.setItem(pendingKey(form), JSON.stringify({ at: Date.now(), fields: [...body.entries()] }));
  } catch (err) { /* storage full or off: the beacon alone */ }
  navigator.sendBeacon(form.dataset.draftUrl, body);
}

function pendingKey(form) { return `weft.pendingDraft.${form.dataset.draftOwner}`; }

function forgetPending(form) {
  try { sessionStorage.removeItem(pendingKey(form)); } catch (err) { /* nothing kept */ }
}

function takePending(form) {
  let pending;
  try { pending = JSON.parse(sessionStorage.getItem(pendingKey(form)) || "null"); } catch (err) { return null; }
  if (!pending || !Array.isArray(pending.fields) || Date.now() - pending.at > PENDING_FOR_MS) return null;
  return pending.fields;
}

function restoreFields(form, fields) {
  const values = new Map();
  for (const [name, value] of fields) values.set(name, [...(values.get(name) || []), String(value)]);
  for (const field of form.elements) {
    if (!field.name || field.name === "csrfmiddlewaretoken" || field.type === "file") continue;
    const given = values.get(field.name) || [];
    if (field.type === "checkbox" || field.type === "radio") field.checked = given.includes(field.value);
    else if (values.has(field.name)) field.value = given[0];
  }
}

document.addEventListener("input", (e) => { if (e.target.closest("#wb-form")) scheduleDraft(); });
document.addEventListener("change", (e) => { if (e.target.closest("#wb-form")) scheduleDraft(); });
document.addEventListener("htmx:afterSwap", (e) => { if (e.target.id === "params") scheduleDraft(); });
window.addEventListener("pagehide", flushDraft);
document.addEventListener("visibilitychange", () => { if (document.hidden) flushDraft(); });

document.addEventListener("DOMContentLoaded", () => {
  const form = draftForm();
  if (form && form.dataset.draftFromUrl) {
    // Opened from a link (?prompt=, ?run=, ?generation=): that is the draft now,
    // and a reload must show the draft, not the link's values again.
    saveDraft();
    history.replaceState(null, "", window.location.pathname);
  } else if (form) {
    const pending = takePending(form);
    if (pending) {
      restoreFields(form, pending);
      saveDraft();
    }
  }
  setSideCollapsed(localStorage.getItem("weft.sideCollapsed") === "1");
});

// ------------------------------------------------------------------ the runs
function csrf() {
  const input = $("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

function dismiss(run) {
  if (run.dataset.dismissUrl) {
    fetch(run.dataset.dismissUrl, { method: "POST", headers: { "X-CSRFToken": csrf() }, credentials: "same-origin" });
  }
  run.remove();
  updateCompare();
}

function setSideCollapsed(collapsed) {
  const wb = $("#wb");
  const toggle = $("#side-toggle");
  if (!wb || !toggle) return;
  wb.classList.toggle("side-collapsed", collapsed);
  toggle.textContent = collapsed ? "Show settings" : "Hide settings";
  toggle.setAttribute("aria-expanded", collapsed ? "false" : "true");
  localStorage.setItem("weft.sideCollapsed", collapsed ? "1" : "0");
}

// Two ticked runs: the compare link.
function updateCompare() {
  const bar = $("#compare-bar");
  if (!bar) return;
  const picked = [...document.querySelectorAll(".compare-pick:checked")].map((c) => c.value);
  bar.hidden = picked.length !== 2;
  if (picked.length === 2) {
    const link = $("#compare-link");
    const base = link.getAttribute("href").split("?")[0];
    // Older run first: A is what was run before.
    const [a, b] = picked.map(Number).sort((x, y) => x - y);
    link.setAttribute("href", `${base}?a=${a}&b=${b}`);
  }
}
document.addEventListener("change", (e) => { if (e.target.matches(".compare-pick")) updateCompare(); });

function openInLoom(prompt) {
  const form = $("#loom-form");
  if (!form) return;
  form.elements.prompt.value = prompt;
  form.submit();
}

// The token popover is static/weft/tokens.js; here only what branching means on
// this page, and its extra "open in the Loom" button.
document.addEventListener("weft:popover", (e) => {
  const { pop, chip } = e.detail;
  if (!$("#loom-form") || !chip.closest(".samples[data-prompt]")) return;
  const loom = document.createElement("button");
  loom.type = "button";
  loom.className = "pop-extra linkish";
  loom.textContent = "Open text up to here in the Loom as a new tree";
  loom.addEventListener("click", () => branch(chip, null));
  pop.append(loom);
});
document.addEventListener("weft:branch", (e) => {
  if (e.detail.chip.closest(".samples[data-prompt]")) branch(e.detail.chip, e.detail.alt);
});

// Prompt + the sample's text before the token + the chosen alternative. The text
// is the token spans' own text (pieces not in the text, like BOS, are skipped);
// with echo the sample already starts with the prompt.
// `alt` null: the text up to and including this token, into the Loom.
function branch(tok, alt) {
  const toLoom = alt === null;
  const pre = tok.closest(".tokens");
  const grid = tok.closest(".samples");
  let text = grid.dataset.echo ? "" : grid.dataset.prompt;
  for (const span of pre.querySelectorAll(".tok")) {
    if (span === tok) break;
    if (span.hasAttribute("data-in")) text += span.textContent;
  }
  text += toLoom ? (tok.hasAttribute("data-in") ? tok.textContent : "") : alt;
  if (toLoom) { openInLoom(text); return; }
  if (editor()) { setPrompt(text); return; }
  sessionStorage.setItem("weft.branch", text);
  window.location.href = grid.dataset.workbench;
}
