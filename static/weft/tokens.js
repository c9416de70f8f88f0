// The token popover every page shares. Chips are rendered (and escaped) by the
// server (core/tokens.py); this builds one popover from a chip's data attributes,
// writing every token with textContent. It lives in the top layer (popover API)
// at a fixed position, so a scrolling panel never clips it.
//
// Mouse: hover shows it, a click pins it. Keyboard: chips are focusable, Enter or
// Space opens it on the first alternative, arrows (or Tab) move, Escape closes it
// and gives focus back to the chip. Picking an alternative inside a container with
// data-branch raises `weft:branch` on the chip ({detail: {alt, index, chip}}); the
// page decides what branching means. `weft:popover` lets a page add its own buttons.
// Inside a text being edited (contenteditable) a click places the caret instead of
// pinning the popover; hovering still shows it.
let pop = null;
let chip = null;
let pinned = false;
let hideTimer = null;

const pct = (p) =>
  p >= 0.995 ? "100%" : p >= 0.001 ? (p * 100).toFixed(1) + "%" : p.toExponential(1);
const chipOf = (el) => (el && el.closest ? el.closest(".tok[data-alts]") : null);
const items = () => (pop ? [...pop.querySelectorAll(".alt, .pop-extra")] : []);

function build(tok) {
  const alts = JSON.parse(tok.dataset.alts || "[]");
  const branching = Boolean(tok.closest("[data-branch]"));
  const el = document.createElement("div");
  el.className = "tok-pop";
  el.setAttribute("popover", "manual");
  el.setAttribute("role", "dialog");
  el.setAttribute("aria-label", "Alternatives for this token");
  const head = document.createElement("div");
  head.className = "pop-head";
  const lp = parseFloat(tok.dataset.lp);
  head.textContent = JSON.stringify(tok.textContent) +
    (isNaN(lp) ? "" : `  p = ${pct(Math.exp(lp))}  logprob ${lp.toFixed(3)}`);
  el.append(head);
  if (tok.dataset.info) {
    const info = document.createElement("div");
    info.className = "pop-info";
    info.textContent = tok.dataset.info;
    el.append(info);
  }
  const list = document.createElement("ol");
  for (const [text, p, sampled] of alts) {
    const li = document.createElement("li");
    const row = document.createElement(branching ? "button" : "div");
    if (branching) {
      row.type = "button";
      row.title = sampled ? "the sampled token" : "branch from here with this token";
    } else {
      row.tabIndex = -1;
    }
    row.className = "alt" + (sampled ? " sampled" : "");
    row.dataset.alt = text;
    const label = document.createElement("span");
    label.className = "alt-text";
    label.textContent = JSON.stringify(text);
    const prob = document.createElement("span");
    prob.className = "alt-p";
    prob.textContent = pct(p);
    const bar = document.createElement("span");
    bar.className = "alt-bar";
    bar.style.width = `${Math.max(1, Math.round(p * 100))}%`;
    row.append(label, prob, bar);
    li.append(row);
    list.append(li);
  }
  el.append(list);
  const foot = document.createElement("div");
  foot.className = "pop-foot";
  const cov = parseFloat(tok.dataset.cov);
  foot.textContent = `mass covered by the ${alts.length} shown: ${pct(isNaN(cov) ? 0 : cov)}` +
    (branching ? " · pick one to branch" : "");
  el.append(foot);
  return el;
}

function place() {
  if (!pop || !chip) return;
  const r = chip.getBoundingClientRect();
  const w = pop.offsetWidth;
  const h = pop.offsetHeight;
  const left = Math.max(4, Math.min(r.left, window.innerWidth - w - 4));
  let top = r.bottom + 4;
  if (top + h > window.innerHeight - 4) top = Math.max(4, r.top - h - 4);
  pop.style.left = `${left}px`;
  pop.style.top = `${top}px`;
}

function open(tok, { focus = false, pin = false } = {}) {
  clearTimeout(hideTimer);
  if (chip !== tok) {
    close(false);
    chip = tok;
    pop = build(tok);
    pop.addEventListener("mouseenter", () => clearTimeout(hideTimer));
    pop.addEventListener("mouseleave", () => { if (!pinned) scheduleClose(); });
    pop.addEventListener("keydown", onPopKey);
    pop.addEventListener("focusout", (e) => {
      if (pop && !pop.contains(e.relatedTarget) && e.relatedTarget !== chip) close(false);
    });
    pop.addEventListener("click", onPopClick);
    document.body.append(pop);
    tok.dispatchEvent(new CustomEvent("weft:popover", { bubbles: true, detail: { pop, chip: tok } }));
    pop.showPopover();
    tok.classList.add("active");
    tok.setAttribute("aria-expanded", "true");
    place();
  }
  pinned = pinned || pin;
  if (focus) {
    const first = items()[0];
    if (first) first.focus();
  }
}

function close(refocus) {
  clearTimeout(hideTimer);
  // Cleared before remove(): removing a focused button fires focusout, which
  // calls back in here.
  const [p, t] = [pop, chip];
  pop = null;
  chip = null;
  pinned = false;
  if (t) {
    t.classList.remove("active");
    t.removeAttribute("aria-expanded");
    if (refocus) t.focus();
  }
  if (p) p.remove();
}

function scheduleClose() {
  clearTimeout(hideTimer);
  hideTimer = setTimeout(() => close(false), 250);
}

function onPopKey(e) {
  const list = items();
  const at = list.indexOf(document.activeElement);
  if (["Escape", "ArrowDown", "ArrowUp", "Tab"].includes(e.key)) e.stopPropagation();
  if (e.key === "Escape") {
    e.preventDefault();
    close(true);
  } else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    const step = e.key === "ArrowDown" ? 1 : -1;
    const next = list[(at + step + list.length) % list.length];
    if (next) next.focus();
  } else if (e.key === "Tab" && list.length) {
    // Tab cycles inside: the popover is at the end of the document.
    e.preventDefault();
    const step = e.shiftKey ? -1 : 1;
    list[(at + step + list.length) % list.length].focus();
  }
}

function onPopClick(e) {
  const alt = e.target.closest("button.alt");
  if (!alt || !chip) return;
  const tok = chip;
  close(false);
  tok.dispatchEvent(new CustomEvent("weft:branch", {
    bubbles: true,
    detail: { alt: alt.dataset.alt, index: tok.dataset.i, chip: tok },
  }));
}

document.addEventListener("mouseover", (e) => {
  const tok = chipOf(e.target);
  if (tok && !pinned) open(tok);
});
document.addEventListener("mouseout", (e) => {
  if (chipOf(e.target) && !pinned) scheduleClose();
});
document.addEventListener("click", (e) => {
  const tok = chipOf(e.target);
  if (tok && tok.isContentEditable) {
    // In a text being edited a click places the caret; hovering still shows the popover.
    if (pop && !pop.contains(e.target) && pinned) close(false);
  } else if (tok) {
    e.preventDefault();
    if (chip === tok && pinned) close(false);
    else open(tok, { pin: true });
  } else if (pop && !pop.contains(e.target)) {
    close(false);
  }
});
document.addEventListener("keydown", (e) => {
  const tok = chipOf(e.target);
  if (!tok || e.ctrlKey || e.metaKey || e.altKey) return; // Ctrl+Enter still runs
  if (e.key === "Enter" || e.key === " " || (e.key === "ArrowDown" && chip === tok)) {
    e.preventDefault();
    e.stopPropagation();
    open(tok, { focus: true, pin: true });
  } else if (e.key === "Escape" && chip === tok) {
    e.preventDefault();
    e.stopPropagation();
    close(true);
  }
}, true);
// One Escape closes an open popover wherever focus is (opened by hover while typing
// elsewhere, or its chip replaced by a stream's swap); handled above when focus is on
// the chip or in the popover.
document.addEventListener("keydown", (e) => {
  if (e.key !== "Escape" || !pop) return;
  const inside = pop.contains(document.activeElement) || document.activeElement === chip;
  e.preventDefault();
  close(inside && chip && chip.isConnected);
});
// The chip moved (a panel scrolled): keep the popover beside it.
document.addEventListener("scroll", place, true);
window.addEventListener("resize", place);
// A swap that removes the chip takes its popover with it.
for (const name of ["htmx:afterSwap", "htmx:oobAfterSwap"]) {
  document.addEventListener(name, () => {
    if (chip && !chip.isConnected) close(false);
  });
}
