// Workbench behaviours: keyboard run, monospace toggle, copy, the token popover and
// "branch from here". Model-written text is only ever set with textContent or
// .value; the server renders every token span (escaped).
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
    } else if (t.closest(".tok-pop .alt")) {
      branch(t.closest(".tok-pop .alt"), false);
    } else if (t.closest(".tok-pop .to-loom")) {
      branch(t.closest(".tok-pop .to-loom"), true);
    }
  });

  function openInLoom(prompt) {
    const form = $("#loom-form");
    if (!form) return;
    form.elements.prompt.value = prompt;
    form.submit();
  }

  // --- token popover -----------------------------------------------------------
  let pop = null;
  let popToken = null;
  let hideTimer = null;

  function pct(p) {
    return p >= 0.995 ? "100%" : p >= 0.001 ? (p * 100).toFixed(1) + "%" : p.toExponential(1);
  }

  function showPop(tok) {
    if (popToken === tok) return;
    hidePop();
    const alts = JSON.parse(tok.dataset.alts || "[]");
    const lp = parseFloat(tok.dataset.lp);
    pop = document.createElement("div");
    pop.className = "tok-pop";
    pop.setAttribute("role", "dialog");
    pop.setAttribute("aria-label", "Alternatives for this token");
    const head = document.createElement("div");
    head.className = "pop-head";
    head.textContent = `${JSON.stringify(tok.textContent)}  p = ${pct(Math.exp(lp))}  logprob ${lp.toFixed(3)}`;
    pop.append(head);
    const list = document.createElement("ol");
    for (const [text, p, sampled] of alts) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.className = "alt" + (sampled ? " sampled" : "");
      b.dataset.alt = text;
      b.title = sampled ? "the sampled token" : "branch: put prompt + text so far + this token in the editor";
      const label = document.createElement("span");
      label.className = "alt-text";
      label.textContent = JSON.stringify(text);
      const prob = document.createElement("span");
      prob.className = "alt-p";
      prob.textContent = pct(p);
      const bar = document.createElement("span");
      bar.className = "alt-bar";
      bar.style.width = `${Math.max(1, Math.round(p * 100))}%`;
      b.append(label, prob, bar);
      li.append(b);
      list.append(li);
    }
    pop.append(list);
    const foot = document.createElement("div");
    foot.className = "pop-foot";
    const cov = parseFloat(tok.dataset.cov);
    foot.textContent = `shown alternatives cover ${pct(isNaN(cov) ? 0 : cov)} · click one to branch`;
    pop.append(foot);
    if ($("#loom-form")) {
      const loom = document.createElement("button");
      loom.type = "button";
      loom.className = "to-loom linkish";
      loom.textContent = "Open text up to here in the Loom as a new tree";
      pop.append(loom);
    }
    pop.addEventListener("mouseenter", () => clearTimeout(hideTimer));
    pop.addEventListener("mouseleave", scheduleHide);
    pop.addEventListener("keydown", (e) => {
      if (e.key === "Escape") { const t = popToken; hidePop(); t.focus(); }
    });
    pop.addEventListener("focusout", (e) => {
      if (!pop || pop.contains(e.relatedTarget) || e.relatedTarget === popToken) return;
      hidePop();
    });
    // Right after the token, so Tab from the token walks into the alternatives.
    tok.after(pop);
    popToken = tok;
    tok.classList.add("active");
    const sample = tok.closest(".sample");
    const box = sample.getBoundingClientRect();
    const r = tok.getBoundingClientRect();
    pop.style.left = `${Math.max(0, Math.min(r.left - box.left, box.width - 260))}px`;
    pop.style.top = `${r.bottom - box.top + 4}px`;
  }

  function hidePop() {
    clearTimeout(hideTimer);
    // Cleared before remove(): removing a focused button fires focusout, which
    // calls back in here.
    const [p, t] = [pop, popToken];
    pop = null;
    popToken = null;
    if (t) t.classList.remove("active");
    if (p) p.remove();
  }

  function scheduleHide() {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(hidePop, 250);
  }

  document.addEventListener("mouseover", (e) => {
    const tok = e.target.closest && e.target.closest(".tok[data-alts]");
    if (tok) { clearTimeout(hideTimer); showPop(tok); }
  });
  document.addEventListener("mouseout", (e) => {
    if (e.target.closest && e.target.closest(".tok[data-alts]")) scheduleHide();
  });
  document.addEventListener("focusin", (e) => {
    const tok = e.target.closest && e.target.closest(".tok[data-alts]");
    if (tok) showPop(tok);
  });
  document.addEventListener("keydown", (e) => {
    const tok = e.target.closest && e.target.closest(".tok[data-alts]");
    if (tok && (e.key === "ArrowDown" || e.key === "Enter") && pop) {
      e.preventDefault();
      const first = pop.querySelector(".alt");
      if (first) first.focus();
    } else if (tok && e.key === "Escape") {
      hidePop();
    }
  });

  // Prompt + the sample's text before the token + the chosen alternative. The text
  // is the token spans' own text (pieces not in the text, like BOS, are skipped);
  // with echo the sample already starts with the prompt.
  function branch(button, toLoom) {
    const tok = popToken;
    const pre = tok.closest(".tokens");
    const grid = tok.closest(".samples");
    let text = grid.dataset.echo ? "" : grid.dataset.prompt;
    for (const span of pre.querySelectorAll(".tok")) {
      if (span === tok) break;
      if (span.hasAttribute("data-in")) text += span.textContent;
    }
    text += toLoom ? (tok.hasAttribute("data-in") ? tok.textContent : "") : button.dataset.alt;
    hidePop();
    if (toLoom) { openInLoom(text); return; }
    if (editor()) { setPrompt(text); return; }
    sessionStorage.setItem("weft.branch", text);
    window.location.href = grid.dataset.workbench;
  }
})();
