// Workbench behaviours: keyboard run, monospace toggle, copy and "branch from here".
// Model-written text is only ever set with textContent or .value; the server renders
// every token chip (escaped) and static/weft/tokens.js owns the popover.
(() => {
  "use strict";
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
      weftCopy(t.closest(".sample").dataset.text, t.closest("[data-copy]"));
    } else if (t.closest("[data-set-max-tokens]")) {
      const field = $("#id_max_tokens");
      field.value = t.closest("[data-set-max-tokens]").dataset.setMaxTokens;
      field.dispatchEvent(new Event("input", { bubbles: true }));
    } else if (t.closest(".run-dismiss")) {
      t.closest(".run").remove();
    } else if (t.closest("[data-loom-from-editor]")) {
      openInLoom(editor().value);
    }
  });

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
})();
