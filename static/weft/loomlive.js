// A tree's page, live (loom/live.py, loom/consumers.py): the page joins the tree's
// socket, which brings other people's changes as small JSON events (node ids and a
// username, never text; the parts of the reader they change, rendered and escaped by
// the server). An event about a node this page shows re-reads those parts; while the
// user is typing, has a dialog open or unsaved input, the update waits behind an
// "updated by … — show" button instead, so what they type is never replaced. The page
// also says which node it is on, and shows where the others are (initials on that node
// in the path, the outlines and the children).
//
// The socket is htmx's ws extension, like every other live part of Weft (the
// generation streams, a batch's progress, the layout's dot): `ws-connect` on
// #loom-live opens and reconnects it; this tree's messages are JSON, so they are taken
// here (htmx:wsBeforeMessage) instead of being swapped. Nothing happens on import: the
// tree page (static/weft/loom.js) and the graph page (loomgraph.js) call startLive().
import { hooks } from "./hooks.js";

// The events that re-read the whole reader: a generation started (its streams come
// with the reader), a tag (the tag bar), a new role (the controls).
export const WHOLE = new Set(["generating", "tags"]);

// What a page does with a tree event (pure: tests/js/test_loomlive.js). `page` says
// what the page is: its client id, the node its reader shows, shows(id) for a node id
// anywhere on it, busy() while its user has something unsaved, graph when the page is
// the graph (it re-reads the whole tree). The answer: "ignore" (this page's own
// change, already shown, or nodes it does not show), "graph", "wait" (behind the
// button), or "refresh" with `whole` (re-read the reader) or `html` (the parts the
// socket brought, only when they are for the node shown; "" asks the server for them).
export function plan(msg, page) {
  if (msg.own) return { act: "ignore" };  // this page's own change (the server knows its id)
  if (page.graph) return { act: "graph" };
  if (page.node === null || !(msg.ids || []).some((id) => page.shows(id))) return { act: "ignore" };
  if (page.busy()) return { act: "wait" };
  const whole = WHOLE.has(msg.event);
  const html = !whole && msg.html && String(msg.node) === String(page.node) ? msg.html : "";
  return { act: "refresh", whole, html };
}

// `unsaved()`: the tree page's text has changes not yet saved (loom.js); `graph`: the
// graph page's reload(), for any change to the tree.
export function startLive({ unsaved = () => false, graph = null } = {}) {
  const bar = document.getElementById("loom-live");
  if (!bar) return;
  const reader = () => document.getElementById("loom-reader");
  // This page's own id: its requests carry it, so the echo of its own changes is ignored.
  const client = (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
  // The page's hook for tests and bench/loom_live.py (static/weft/hooks.js).
  const live = { client, updates: 0, applied: [], people: [], revoked: false };
  hooks.live = live;

  document.addEventListener("htmx:configRequest", (ev) => {
    ev.detail.headers["X-Weft-Client"] = client;
  });

  // --- what waits while the user is busy -------------------------------------------------
  let touched = false;  // a field of the reader changed and not yet sent
  let pending = null;  // the event that is waiting
  document.addEventListener("input", (ev) => {
    const r = reader();
    if (r && r.contains(ev.target) && ev.target.closest("form")) touched = true;
  });
  function busy() {
    const r = reader();
    if (!r) return false;
    if (unsaved()) return true;
    if (touched || r.querySelector("dialog[open]")) return true;
    const a = document.activeElement;
    return Boolean(a && r.contains(a) &&
      (a.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(a.tagName)));
  }
  function showWaiting(name) {
    let b = document.getElementById("loom-update");
    if (!b) {
      b = document.createElement("button");
      b.type = "button";
      b.id = "loom-update";
      b.className = "linkish loom-update";
      b.addEventListener("click", () => { touched = false; refresh(true); });
      bar.append(b);
    }
    b.textContent = `Updated by ${name || "someone"} — show`;
    bar.hidden = false;
  }
  const hideWaiting = () => { const b = document.getElementById("loom-update"); if (b) b.remove(); };

  // --- applying an event ---------------------------------------------------------------------
  const urlOf = (r, id) => r.dataset.nodeUrl.replace(/\/0\/$/, `/${id}/`);
  const shows = (id) => id === Number(reader().dataset.node) || Boolean(document.querySelector(`[data-id="${id}"]`));
  let liveStatus = 0;
  document.addEventListener("htmx:afterRequest", (ev) => {
    if (ev.detail.pathInfo && /\/live\/$/.test(ev.detail.pathInfo.requestPath || "")) {
      liveStatus = ev.detail.xhr ? ev.detail.xhr.status : 0;
    }
  });
  // The parts a change touches, out of band (loom/views.py node_live), or the whole
  // reader (`whole`: a generation started — its streams come with the reader — a tag, a
  // new role). The reader's keyboard targets follow.
  async function refresh(whole, html) {
    const r = reader();
    pending = null;
    hideWaiting();
    if (!r) return;
    const t = performance.timeOrigin + performance.now();
    liveStatus = 0;
    if (!whole && html) {
      // The socket brought the parts already (rendered once for every page on the node).
      htmx.swap(r, html, { swapStyle: "none" });
      const nav = document.getElementById("loom-nav");
      if (nav) Object.assign(reader().dataset, nav.dataset);
    } else if (whole) {
      await htmx.ajax("GET", urlOf(r, r.dataset.node), { target: "#loom-reader", swap: "outerHTML", source: r });
    } else {
      liveStatus = 0;
      const url = urlOf(r, r.dataset.node).replace(/\/$/, "/live/");
      await htmx.ajax("GET", url, { target: "#loom-reader", swap: "none", source: r });
      const nav = document.getElementById("loom-nav");
      if (liveStatus === 200 && nav) Object.assign(reader().dataset, nav.dataset);
    }
    // The node shown is gone (deleted, merged away): show the top of the tree instead.
    if ((whole && reader() === r && r.isConnected) || (!whole && liveStatus === 404)) {
      await htmx.ajax("GET", urlOf(r, r.dataset.root), { target: "#loom-reader", swap: "outerHTML", source: r });
    }
    drawPresence();
    live.updates += 1;
    const via = whole ? "reader" : html ? "socket" : "request";
    live.applied.push({ started: t, done: performance.timeOrigin + performance.now(), via });
    bar.dataset.updates = String(live.updates);
  }
  function onEvent(msg) {
    const r = reader();
    const step = plan(msg, { client, node: r ? r.dataset.node : null, shows, busy, graph: Boolean(graph) });
    if (step.act === "graph") graph();
    else if (step.act === "wait") { pending = msg; showWaiting(msg.name); }
    else if (step.act === "refresh") refresh(step.whole, step.html);
  }

  // --- presence ---------------------------------------------------------------------------------
  function mark(el, p, where) {
    const m = document.createElement("span");
    m.className = `presence-mark pc${p.colour}`;
    m.textContent = p.initials;
    m.title = `${p.name} is here`;
    if (where === "after") el.after(m); else el.append(m);
  }
  function drawPresence() {
    document.querySelectorAll(".presence-mark").forEach((m) => m.remove());
    document.querySelectorAll("#loom-doc .seg[data-here]").forEach((s) => {
      delete s.dataset.here;
      s.style.removeProperty("--here");
    });
    const people = document.getElementById("loom-people");
    if (people) people.replaceChildren();
    for (const p of live.people) {
      if (people) {
        const chip = document.createElement("span");
        chip.className = `presence-mark person pc${p.colour}`;
        chip.textContent = p.initials;
        chip.title = p.node ? `${p.name}, on node ${p.node}` : p.name;
        people.append(chip);
      }
      if (!p.node) continue;
      const row = document.querySelector(`#loom-outline li[data-id="${p.node}"] > .oi-row`);
      if (row) mark(row, p);
      document.querySelectorAll(`.outline-list a.go[data-id="${p.node}"], #loom-children a.go[data-id="${p.node}"]`)
        .forEach((a) => mark(a, p, "after"));
      // In the text only an attribute (drawn by CSS): the text's own characters stay its own.
      const seg = document.querySelector(`#loom-doc .seg[data-id="${p.node}"]`);
      if (seg) seg.dataset.here = (seg.dataset.here ? `${seg.dataset.here} ` : "") + p.initials;
    }
    bar.hidden = live.people.length === 0 && !document.getElementById("loom-update") && !live.revoked;
  }

  // --- the socket (htmx's ws extension on the bar) --------------------------------------------
  let ws = null;
  let shownNode = null;
  function here(force) {
    const r = reader();
    if (!ws || ws.readyState !== WebSocket.OPEN || !r) return;
    const archived = document.querySelector("#show-archived[aria-pressed=true]") !== null;
    if (!force && shownNode === `${r.dataset.node}:${archived}`) return;
    shownNode = `${r.dataset.node}:${archived}`;
    ws.send(JSON.stringify({ here: Number(r.dataset.node), client, archived }));
  }
  // `keep`: the socket was closed (too many, signed out) but the page may still be used.
  function revoked(text, keep = false) {
    live.revoked = true;
    live.people = [];
    drawPresence();
    const note = document.createElement("p");
    note.className = "error revoked";
    note.setAttribute("role", "alert");
    note.textContent = text;
    bar.replaceChildren(note);
    bar.hidden = false;
    const r = reader();
    if (r && !keep) r.inert = true;  // nothing on it can be sent any more
  }
  // The extension reconnects after a dropped connection (1006) or a server restart
  // (1011-1013), not after the server's own close: a revoked page's (loom/consumers.py).
  bar.addEventListener("htmx:wsOpen", (ev) => {
    ws = ev.detail.event.target;
    live.socket = ws;
    live.closed = false;
    here(true);
  });
  bar.addEventListener("htmx:wsClose", () => { live.closed = true; });
  bar.addEventListener("htmx:wsBeforeMessage", (ev) => {
    ev.preventDefault();  // JSON, not fragments to swap
    let msg;
    try { msg = JSON.parse(ev.detail.message); } catch (e) { return; }
    if (msg.kind === "event") onEvent(msg);
    else if (msg.kind === "presence") { live.people = msg.people || []; drawPresence(); }
    else if (msg.kind === "role") { live.role = msg.role; touched = false; refresh(true); }
    else if (msg.kind === "hello") live.role = msg.role;
    else if (msg.kind === "revoked") revoked(msg.message);
    else if (msg.kind === "closed") revoked(msg.message, true);  // too many, signed out
  });
  let seenReader = reader();
  document.addEventListener("htmx:afterSwap", (ev) => {
    // Only a reader actually replaced is fresh (a refused save swaps nothing: "none").
    if (!ev.detail.target || ev.detail.target.id !== "loom-reader" || reader() === seenReader) return;
    seenReader = reader();
    touched = false;
    if (pending) { pending = null; hideWaiting(); }  // the swap brought the update too
    here(false);
    drawPresence();
  });
  setInterval(() => here(true), 25000);  // presence expires without it (live.PRESENCE_TTL)
}
