// The graph view (templates/loom/graph.html): the whole tree as boxes on a canvas, laid
// out left to right for this screen (static/weft/loomlayout.js). Each frame draws only
// what is in view, batched by colour, and labels only boxes large enough to read, so
// 10,000 nodes pan and zoom within a frame. At any zoom the boxes show their model's
// colour, the current path, bookmarks, unread nodes and ratings; a minimap shows where
// the view is when zoomed in. Click a box (or Enter on the selected one) to read it;
// a folded chain opens instead. Keys move as in the reader: ← parent, → child, ↑ ↓
// siblings.
import { layout } from "./loomlayout.js";
import { startLive } from "./loomlive.js";
import { hooks } from "./hooks.js";

function graphPage() {
  const MODEL = 1, BOOKMARK = 2, ARCHIVED = 4, ON_PATH = 8, UNREAD = 16, UP = 32, DOWN = 64;
  const MC = ["#1971c2", "#e8590c", "#2f9e44", "#9c36b5", "#c2255c", "#0c8599", "#846a00", "#495057"];
  const READABLE = 24; // px per slot where labels read well: the scale the graph opens at
  const MAX_K = 60;
  const canvas = document.getElementById("loom-graph");
  if (!canvas) return;
  const ctx = canvas.getContext("2d");
  const mini = document.getElementById("loom-minimap");
  const mctx = mini ? mini.getContext("2d") : null;
  const status = document.getElementById("graph-status");
  let g = null; // the tree: parallel arrays from the server
  let L = null; // the layout: boxes and edges in world units
  let bx, by, bw, bh; // the boxes' rectangles, typed for speed
  const view = { x: 0, y: 0, k: 1 }; // screen = (world - view) * k
  let selected = -1; // a box
  let pending = false;
  let miniImage = null;
  const unfolded = new Set();
  let openAll = false; // every fold opened (the bench's and tests' worst case)

  const tint = (hex, amount) => {
    const v = parseInt(hex.slice(1), 16);
    const mix = (c) => Math.round(c + (255 - c) * amount);
    return `rgb(${mix(v >> 16)}, ${mix((v >> 8) & 255)}, ${mix(v & 255)})`;
  };
  const FILL = MC.map((c) => tint(c, 0.72));
  const UNNAMED = "#16a34a", UNNAMED_FILL = tint(UNNAMED, 0.8); // model-written, no model named
  const W = () => canvas.clientWidth, H = () => canvas.clientHeight;

  function relayout() {
    L = layout(g, W(), H(), unfolded, openAll);
    const it = L.items;
    bx = Float64Array.from(it.x); by = Float64Array.from(it.y);
    bw = Float64Array.from(it.w); bh = Float64Array.from(it.h);
    miniImage = null;
    look = null;
    overview = null;
  }

  function resize() {
    // The drawing surface is the canvas's content box (its border is not drawn on).
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.round(W() * dpr));
    canvas.height = Math.max(1, Math.round(H() * dpr));
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    draw();
  }

  function draw() {
    if (pending || !L) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }

  // The flags a box shows: a node's own, or those of every node a fold holds.
  function boxFlags() {
    const flags = new Uint8Array(bx.length);
    for (let r = 0; r < g.ids.length; r++) flags[L.item[r]] |= g.flags[r];
    return flags;
  }

  // Each box's look, worked out once per layout: a frame then only sorts the boxes in
  // view into a few buckets and draws each bucket as one path.
  const HUMAN = "#ffffff", FOLDED = "#e2e8f0", CURRENT = "#93c5fd";
  let look = null;
  function styles() {
    const n = bx.length;
    const fills = [...FILL, UNNAMED_FILL, HUMAN, FOLDED, CURRENT];
    const [unnamedF, humanF, foldF, currentF] = [MC.length, MC.length + 1, MC.length + 2, MC.length + 3];
    const fill = new Uint8Array(n), archived = new Uint8Array(n), line = new Uint8Array(n);
    const stripe = new Int8Array(n).fill(-2), flags = boxFlags(), edgePath = new Uint8Array(L.edges.child.length);
    for (let i = 0; i < n; i++) {
      const f = flags[i];
      const node = L.items.node[i], colour = g.colour[node];
      if (L.items.fold[i]) fill[i] = foldF;
      else if (node === g.current) fill[i] = currentF;
      else if (colour >= 0) fill[i] = colour % MC.length;
      else fill[i] = f & MODEL ? unnamedF : humanF;
      if (!L.items.fold[i] && f & MODEL) stripe[i] = colour >= 0 ? colour % MC.length : -1;
      archived[i] = f & ARCHIVED ? 1 : 0;
      line[i] = f & BOOKMARK ? 2 : f & ON_PATH ? 1 : 0;
    }
    L.edges.child.forEach((c, e) => { edgePath[e] = flags[c] & ON_PATH ? 1 : 0; });
    look = { fills, fill, archived, line, stripe, flags, edgePath };
  }

  // Draw the boxes in view `v` (screen = (world - v) * v.k) onto `ctx`, w × h px.
  function paint(ctx, v, w, h, selection = true) {
    const k = v.k, vx = v.x, vy = v.y;
    ctx.save();
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, ctx.canvas.width, ctx.canvas.height);
    ctx.restore();
    if (!look) styles();
    const x0 = vx - 1, x1 = vx + w / k + 1, y0 = vy - 1, y1 = vy + h / k + 1;
    const n = bx.length;
    const visible = [];
    for (let i = 0; i < n; i++) {
      if (bx[i] + bw[i] >= x0 && bx[i] <= x1 && by[i] + bh[i] >= y0 && by[i] <= y1) visible.push(i);
    }
    // Edges, the current path's last (on top), thicker; straight when far out.
    const E = L.edges, curved = k > 6;
    for (const onPath of [0, 1]) {
      ctx.beginPath();
      for (let e = 0; e < E.x0.length; e++) {
        if (look.edgePath[e] !== onPath) continue;
        const ex0 = E.x0[e], ex1 = E.x1[e], ey0 = E.y0[e], ey1 = E.y1[e];
        if (ex1 < x0 || ex0 > x1 || (ey0 < y0 && ey1 < y0) || (ey0 > y1 && ey1 > y1)) continue;
        const ax = (ex0 - vx) * k, ay = (ey0 - vy) * k, cx = (ex1 - vx) * k, cy = (ey1 - vy) * k;
        ctx.moveTo(ax, ay);
        if (curved) { const mx = (ax + cx) / 2; ctx.bezierCurveTo(mx, ay, mx, cy, cx, cy); }
        else ctx.lineTo(cx, cy);
      }
      ctx.strokeStyle = onPath ? "#1d4ed8" : "#94a3b8";
      ctx.lineWidth = onPath ? Math.max(2, Math.min(4, k * 0.12)) : 1;
      ctx.stroke();
    }
    // Boxes into buckets: fill (archived apart), outline, stripe, marks.
    const F = look.fills.length;
    const fills = Array.from({ length: 2 * F }, () => []);
    const lines = [[], [], []], stripes = Array.from({ length: MC.length + 1 }, () => []);
    const unread = [], up = [], down = [], bm = [];
    for (const i of visible) {
      fills[look.fill[i] + F * look.archived[i]].push(i);
      lines[look.line[i]].push(i);
      if (look.stripe[i] > -2) stripes[look.stripe[i] + 1].push(i);
      const f = look.flags[i];
      if (f & UNREAD) unread.push(i);
      if (f & UP) up.push(i);
      if (f & DOWN) down.push(i);
      if (f & BOOKMARK) bm.push(i);
    }
    const rects = (list, sx0 = 0, sw1 = null) => {
      ctx.beginPath();
      for (const i of list) {
        const sw = Math.max(1, bw[i] * k);
        ctx.rect((bx[i] - vx) * k + sx0, (by[i] - vy) * k, sw1 === null ? sw : sw1(sw), Math.max(1, bh[i] * k));
      }
    };
    for (let b = 0; b < 2 * F; b++) {
      if (!fills[b].length) continue;
      ctx.globalAlpha = b >= F ? 0.45 : 1;
      ctx.fillStyle = look.fills[b % F];
      rects(fills[b]);
      ctx.fill();
    }
    ctx.globalAlpha = 1;
    // The model's own colour as a stripe at the box's left edge (-1: a model unnamed).
    stripes.forEach((list, c) => {
      if (!list.length) return;
      ctx.fillStyle = c === 0 ? UNNAMED : MC[c - 1];
      rects(list, 0, (sw) => Math.max(2, Math.min(5, sw * 0.3)));
      ctx.fill();
    });
    const outline = [["#64748b", 1], ["#1d4ed8", 2], ["#d97706", 2.5]];
    lines.forEach((list, l) => {
      if (!list.length) return;
      ctx.strokeStyle = outline[l][0];
      ctx.lineWidth = outline[l][1];
      rects(list);
      ctx.stroke();
    });
    // Marks that read at the smallest box: unread dot, rating bar, bookmark corner.
    const each = (list, colour, place) => {
      if (!list.length) return;
      ctx.fillStyle = colour;
      ctx.beginPath();
      for (const i of list) place((bx[i] - vx) * k, (by[i] - vy) * k, Math.max(1, bw[i] * k), Math.max(1, bh[i] * k));
      ctx.fill();
    };
    each(unread, "#7c3aed", (sx, sy, sw, sh) => {
      const r = Math.max(1.5, Math.min(4, sh * 0.22)), cx = sx + sw - r - 1, cy = sy + r + 1;
      ctx.moveTo(cx + r, cy);
      ctx.arc(cx, cy, r, 0, 2 * Math.PI);
    });
    const bar = (sx, sy, sw, sh) => { const t = Math.max(2, sh * 0.18); ctx.rect(sx, sy + sh - t, sw, t); };
    each(up, "#2f9e44", bar);
    each(down, "#c92a2a", bar);
    each(bm, "#d97706", (sx, sy, sw, sh) => {
      const c = Math.max(3, Math.min(9, sh * 0.4));
      ctx.moveTo(sx, sy); ctx.lineTo(sx + c, sy); ctx.lineTo(sx, sy + c); ctx.closePath();
    });
    // The current node and the selected box.
    const ring = (i, colour, width) => {
      if (i < 0) return;
      ctx.strokeStyle = colour;
      ctx.lineWidth = width;
      ctx.strokeRect((bx[i] - vx) * k - width / 2, (by[i] - vy) * k - width / 2, bw[i] * k + width, bh[i] * k + width);
    };
    ring(L.item[g.current], "#1e3a8a", 3);
    if (selection) ring(selected, "#111827", 2);
    // Labels once a box is large enough to read.
    const sh = bh.length ? bh[0] * k : 0;
    let labelled = 0;
    if (sh >= 11) {
      const size = Math.max(9, Math.min(14, sh * 0.6));
      ctx.font = `${size}px system-ui, sans-serif`;
      ctx.textBaseline = "middle";
      ctx.fillStyle = "#111827";
      const per = size * 0.55;
      for (const i of visible) {
        const sw = bw[i] * k;
        if (sw < 28) continue;
        const node = L.items.node[i], f = look.flags[i];
        const own = (g.label[node] || "(empty)").replace(/\s+/g, " ");
        const text = L.items.fold[i] === 1 ? `⋯ ${L.items.count[i]} nodes (open)`
          : L.items.fold[i] === 2 ? `${own} ⊕ ${L.items.count[i] - 1} below`
          : (f & BOOKMARK ? "★ " : "") + (f & UP ? "▲ " : f & DOWN ? "▼ " : "") + own;
        const room = Math.floor((sw - 10) / per);
        if (room < 2) continue;
        const shown = text.length > room ? text.slice(0, room - 1) + "…" : text;
        ctx.fillText(shown, (bx[i] - vx) * k + 7, (by[i] - vy) * k + sh / 2);
        labelled++;
      }
    }
    return { drawn: visible.length, labelled };
  }

  // While the view moves near the fit, a big tree is one picture of itself (drawn once,
  // at twice the fit's scale) moved and scaled: one image a frame, not ten thousand
  // boxes; once the view rests it is drawn in full again, sharp.
  const BLIT_OVER = 3000, SETTLE_MS = 150;
  let overview = null, moving = false, settleTimer = null, last = { drawn: 0, labelled: 0 };
  function moved() {
    moving = true;
    clearTimeout(settleTimer);
    settleTimer = setTimeout(() => { moving = false; draw(); }, SETTLE_MS);
  }
  function buildOverview() {
    const ko = fitScale() * 2, o = document.createElement("canvas");
    o.width = Math.ceil((L.width + 2) * ko);
    o.height = Math.ceil((L.height + 2) * ko);
    paint(o.getContext("2d"), { x: -1, y: -1, k: ko }, o.width, o.height, false);
    overview = { canvas: o, k: ko };
  }
  // Drawn ahead, while the page is idle, so the first move does not wait for it.
  function overviewSoon() {
    if (bx.length <= BLIT_OVER) return;
    setTimeout(() => { if (!overview && L) buildOverview(); }, 200);
  }

  function render() {
    const t0 = performance.now();
    const fitK = fitScale();
    if (moving && bx.length > BLIT_OVER && view.k <= fitK * 2) {
      if (!overview) buildOverview();
      ctx.save();
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      ctx.restore();
      const scale = view.k / overview.k;
      ctx.drawImage(overview.canvas, (-1 - view.x) * view.k, (-1 - view.y) * view.k,
                    overview.canvas.width * scale, overview.canvas.height * scale);
      if (selected >= 0) {
        ctx.strokeStyle = "#111827";
        ctx.lineWidth = 2;
        ctx.strokeRect((bx[selected] - view.x) * view.k - 1, (by[selected] - view.y) * view.k - 1,
                       bw[selected] * view.k + 2, bh[selected] * view.k + 2);
      }
    } else {
      last = paint(ctx, view, W(), H());
    }
    canvas.dataset.drawn = last.drawn;
    canvas.dataset.labelled = last.labelled;
    canvas.dataset.frameMs = (performance.now() - t0).toFixed(2);
    renderMinimap();
  }

  // --- the minimap: the whole tree small, and where the view is ---------------------------
  function miniScale() {
    return Math.min(mini.width / (L.width + 2), mini.height / (L.height + 2));
  }
  function renderMinimap() {
    if (!mini) return;
    const whole = view.x <= 0 && view.y <= 0 && view.x + W() / view.k >= L.width && view.y + H() / view.k >= L.height;
    mini.hidden = whole;
    if (whole) return;
    const s = miniScale();
    if (!miniImage) {
      miniImage = document.createElement("canvas");
      miniImage.width = mini.width; miniImage.height = mini.height;
      const m = miniImage.getContext("2d");
      m.fillStyle = "rgba(255,255,255,0.92)";
      m.fillRect(0, 0, mini.width, mini.height);
      m.fillStyle = "#94a3b8";
      for (let i = 0; i < bx.length; i++) m.fillRect(bx[i] * s, by[i] * s, Math.max(1, bw[i] * s), Math.max(1, bh[i] * s));
      m.fillStyle = "#1d4ed8";
      for (let i = 0; i < bx.length; i++) if (look.flags[i] & ON_PATH) m.fillRect(bx[i] * s, by[i] * s, Math.max(1.5, bw[i] * s), Math.max(1.5, bh[i] * s));
    }
    mctx.clearRect(0, 0, mini.width, mini.height);
    mctx.drawImage(miniImage, 0, 0);
    mctx.strokeStyle = "#dc2626";
    mctx.lineWidth = 1.5;
    mctx.strokeRect(view.x * s, view.y * s, (W() / view.k) * s, (H() / view.k) * s);
  }

  // --- the view ----------------------------------------------------------------------------
  const centre = (i) => [bx[i] + bw[i] / 2, by[i] + bh[i] / 2];
  function centreOn(i, k) {
    if (i < 0) return;
    if (k) view.k = k;
    const [cx, cy] = centre(i);
    view.x = cx - W() / 2 / view.k;
    view.y = cy - H() / 2 / view.k;
    draw();
  }
  function fitScale() {
    return Math.min(MAX_K, (0.96 * W()) / (L.width + 1), (0.96 * H()) / (L.height + 1));
  }
  function fit() {
    view.k = fitScale();
    view.x = L.width / 2 - W() / 2 / view.k;
    view.y = L.height / 2 - H() / 2 / view.k;
    draw();
  }
  function zoom(factor, sx, sy) {
    const k = Math.max(fitScale() / 4, Math.min(MAX_K * 2, view.k * factor));
    if (sx === undefined) { sx = W() / 2; sy = H() / 2; }
    view.x += sx / view.k - sx / k;
    view.y += sy / view.k - sy / k;
    view.k = k;
    moved();
    draw();
  }
  function hit(sx, sy) {
    const x = sx / view.k + view.x, y = sy / view.k + view.y;
    for (let i = 0; i < bx.length; i++) {
      if (x >= bx[i] && x <= bx[i] + bw[i] && y >= by[i] && y <= by[i] + bh[i]) return i;
    }
    return -1;
  }

  function describe(i) {
    const node = L.items.node[i], f = look ? look.flags[i] : boxFlags()[i];
    if (L.items.fold[i] === 1) return `A chain of ${L.items.count[i]} nodes, folded — Enter opens it.`;
    if (L.items.fold[i] === 2) {
      return `Node ${g.ids[node]} and the ${L.items.count[i] - 1} nodes below it, folded — Enter opens it.`;
    }
    const marks = [f & BOOKMARK && "bookmarked", f & UNREAD && "unread", f & UP && "rated up",
                   f & DOWN && "rated down", f & ARCHIVED && "archived"].filter(Boolean);
    return `Node ${g.ids[node]}: ${g.label[node] || "(empty)"}${marks.length ? " · " + marks.join(" · ") : ""} — Enter to read it.`;
  }
  function select(i) {
    if (i === undefined || i < 0) return;
    selected = i;
    const margin = 2;
    const left = view.x, top = view.y, w = W() / view.k, h = H() / view.k;
    if (bx[i] < left + margin || bx[i] + bw[i] > left + w - margin || by[i] < top + margin || by[i] + bh[i] > top + h - margin) centreOn(i);
    status.textContent = describe(i);
    canvas.dataset.selected = L.items.fold[i] ? "" : g.ids[L.items.node[i]];
    draw();
  }
  function open(i) {
    if (L.items.fold[i]) {
      const first = L.items.node[i];
      unfolded.add(g.ids[first]);
      relayout();
      selected = L.item[first];
      centreOn(selected);
      status.textContent = describe(selected);
      return;
    }
    location.href = canvas.dataset.nodeUrl.replace("/0/", `/${g.ids[L.items.node[i]]}/`);
  }

  // The node a box stands for when moving from it: a fold's first (upward) or last one.
  const lastOf = (i) => {
    let x = L.items.node[i];
    for (let k = 1; k < L.items.count[i]; k++) x = L.kids[x][0];
    return x;
  };
  function move(key) {
    const i = selected;
    const first = L.items.node[i], last = L.items.fold[i] === 1 ? lastOf(i) : first;
    if (key === "ArrowLeft") return select(g.parent[first] >= 0 ? L.item[g.parent[first]] : -1);
    if (key === "ArrowRight") {
      if (L.items.fold[i] === 2) return open(i); // a folded subtree: → opens it
      return select(L.kids[last].length ? L.item[L.kids[last][0]] : -1);
    }
    const siblings = g.parent[first] >= 0 ? L.kids[g.parent[first]] : [first];
    const at = siblings.indexOf(first) + (key === "ArrowDown" ? 1 : -1);
    if (at >= 0 && at < siblings.length) select(L.item[siblings[at]]);
  }

  // --- input -----------------------------------------------------------------------------
  let drag = null;
  canvas.addEventListener("pointerdown", (ev) => {
    drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false };
    canvas.setPointerCapture(ev.pointerId);
  });
  canvas.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 4) { drag.moved = true; canvas.classList.add("dragging"); }
    if (drag.moved) { view.x = drag.vx - dx / view.k; view.y = drag.vy - dy / view.k; moved(); draw(); }
  });
  canvas.addEventListener("pointerup", (ev) => {
    const was = drag;
    drag = null;
    canvas.classList.remove("dragging");
    if (!was || was.moved) return;
    const r = canvas.getBoundingClientRect();
    const i = hit(ev.clientX - r.left, ev.clientY - r.top);
    if (i >= 0) open(i);
  });
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    zoom(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  if (mini) {
    mini.addEventListener("pointerdown", (ev) => {
      const r = mini.getBoundingClientRect(), s = miniScale();
      view.x = (ev.clientX - r.left) / s - W() / 2 / view.k;
      view.y = (ev.clientY - r.top) / s - H() / 2 / view.k;
      draw();
    });
  }
  canvas.addEventListener("keydown", (ev) => {
    if (!L || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const keys = {
      ArrowUp: () => move("ArrowUp"), ArrowDown: () => move("ArrowDown"),
      ArrowLeft: () => move("ArrowLeft"), ArrowRight: () => move("ArrowRight"),
      Enter: () => open(selected),
      "+": () => zoom(1.25), "=": () => zoom(1.25), "-": () => zoom(0.8),
      c: () => { select(L.item[g.current]); centreOn(L.item[g.current]); },
      f: fit,
    };
    if (!keys[ev.key]) return;
    ev.preventDefault();
    keys[ev.key]();
  });
  document.addEventListener("click", (ev) => {
    const b = ev.target.closest("[data-graph]");
    if (!b || !L) return;
    const act = b.dataset.graph;
    if (act === "zoom-in") zoom(1.25);
    if (act === "zoom-out") zoom(0.8);
    if (act === "fit") fit();
    if (act === "current") { select(L.item[g.current]); centreOn(L.item[g.current], Math.max(view.k, READABLE)); }
  });

  // The model colours of this tree, named (text only: labels are the user's model ids).
  function legend(models) {
    const box = document.getElementById("graph-models");
    if (!box) return;
    for (const [label, colour] of models) {
      const key = document.createElement("span");
      key.className = "model-key";
      key.style.setProperty("--mc", MC[colour % MC.length]);
      key.style.background = FILL[colour % MC.length];
      key.textContent = label;
      box.append(key);
    }
  }

  // The page's own hook for tests and bench/loom_graph.py (static/weft/hooks.js): boxes
  // on screen, the view.
  const screenBox = (i) => ({ x: (bx[i] - view.x) * view.k, y: (by[i] - view.y) * view.k, w: bw[i] * view.k, h: bh[i] * view.k });
  const hook = {
    screenOf: (id) => { const b = screenBox(L.item[g.ids.indexOf(id)]); return { x: b.x + b.w / 2, y: b.y + b.h / 2 }; },
    boxOf: (id) => screenBox(L.item[g.ids.indexOf(id)]),
    boxes: () => Array.from({ length: bx.length }, (_, i) => screenBox(i)),
    folds: () => L.items.fold.filter(Boolean).length,
    openAll: () => { openAll = true; relayout(); selected = L.item[g.current]; fit(); },
    centreOn: (id, k) => centreOn(L.item[g.ids.indexOf(id)], k),
    zoom, fit,
    pan: (dx, dy) => { view.x += dx / view.k; view.y += dy / view.k; moved(); draw(); },
    view: () => ({ ...view }),
    // One frame as the page draws it now (while moving: the picture), and a full draw.
    frame: () => { const t0 = performance.now(); render(); return performance.now() - t0; },
    full: () => { const t0 = performance.now(); paint(ctx, view, W(), H()); return performance.now() - t0; },
  };

  // Someone else changed the tree (static/weft/loomlive.js): read it again, keeping the
  // view and the selected node where they are.
  let reloading = null;
  function reload() {
    if (!g || reloading) return reloading;
    const keep = selected >= 0 && L.items.node[selected] !== undefined ? g.ids[L.items.node[selected]] : null;
    reloading = fetch(canvas.dataset.url, { credentials: "include", cache: "no-store" })
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
      .then((data) => {
        g = data;
        legend(g.models);
        relayout();
        const at = keep === null ? -1 : g.ids.indexOf(keep);
        selected = L.item[at >= 0 ? at : g.current];
        canvas.dataset.reloads = String(Number(canvas.dataset.reloads || 0) + 1);
        overviewSoon();
        draw();
      })
      .catch(() => {})
      .finally(() => { reloading = null; });
    return reloading;
  }
  hook.reload = reload;
  hooks.graph = hook;
  startLive({ graph: reload });

  const t0 = performance.now();
  // The same request as the page's preload (credentials and all), so it is served from it.
  fetch(canvas.dataset.url, { credentials: "include" })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
    .then((data) => {
      const fetched = performance.now();
      canvas.dataset.fetchMs = (fetched - t0).toFixed(1);
      g = data;
      legend(g.models);
      relayout();
      canvas.dataset.layoutMs = (performance.now() - fetched).toFixed(1);
      new ResizeObserver(() => { relayout(); resize(); overviewSoon(); }).observe(canvas);
      resize();
      // Opens centred on the current node, at a scale where its words can be read.
      selected = L.item[g.current];
      centreOn(selected, Math.max(fitScale(), READABLE));
      status.textContent = describe(selected);
      canvas.dataset.selected = g.ids[g.current];
      requestAnimationFrame(() => {
        canvas.dataset.ready = "true";
        performance.mark("weft-graph-drawn");
        overviewSoon();
      });
    })
    .catch((err) => { status.textContent = `The graph could not be loaded (${err.message}). Reload to try again.`; });
}

graphPage();
