// The graph view (templates/loom/graph.html): the whole tree as boxes on a
// canvas, laid out by the server (loom/tree_views.py graph_layout: columns and
// depths). Each frame draws only the boxes and edges inside the view, and
// labels only when they are large enough to read, so 10,000 nodes pan and zoom
// smoothly. Click a box (or Enter on the selected one) to read that node.
(() => {
  const BOX_W = 150, BOX_H = 34, COL = 170, ROW = 70; // world units
  const MIN_K = 1e-4; // far enough out to fit 100,000 leaves in a window
  const MODEL = 1, BOOKMARK = 2, ARCHIVED = 4, ON_PATH = 8;
  const canvas = document.getElementById("loom-graph");
  if (!canvas) return;
  const ctx = canvas.getContext("2d");
  const status = document.getElementById("graph-status");
  let g = null; // the layout: parallel arrays
  let kids = []; // child indices per node
  let view = { x: 0, y: 0, k: 1 }; // screen = (world - view) * k
  let selected = -1;
  let pending = false;

  const wx = (i) => g.x[i] * COL;
  const wy = (i) => g.y[i] * ROW;

  function resize() {
    const r = canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.round(r.width * dpr));
    canvas.height = Math.max(1, Math.round(r.height * dpr));
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    draw();
  }

  function draw() {
    if (pending || !g) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      render();
    });
  }

  function render() {
    const t0 = performance.now();
    const w = canvas.clientWidth, h = canvas.clientHeight, k = view.k;
    ctx.clearRect(0, 0, w, h);
    // The world rectangle in view, with a box's margin.
    const x0 = view.x - BOX_W, x1 = view.x + w / k + BOX_W;
    const y0 = view.y - BOX_H, y1 = view.y + h / k + BOX_H;
    const n = g.ids.length;
    const inView = (i) => { const x = wx(i), y = wy(i); return x >= x0 && x <= x1 && y >= y0 && y <= y1; };
    // Edges: parent's bottom to child's top; drawn when the edge's box crosses the view.
    ctx.lineWidth = 1;
    for (const pathPass of [false, true]) {
      ctx.beginPath();
      ctx.strokeStyle = pathPass ? "#2563eb" : "#94a3b8";
      ctx.lineWidth = pathPass ? 2.5 : 1;
      for (let i = 0; i < n; i++) {
        const p = g.parent[i];
        if (p < 0 || ((g.flags[i] & ON_PATH) !== 0) !== pathPass) continue;
        const ax = wx(p), ay = wy(p) + BOX_H / 2, bx = wx(i), by = wy(i) - BOX_H / 2;
        if (Math.max(ax, bx) < x0 || Math.min(ax, bx) > x1 || by < y0 || ay > y1) continue;
        const my = (ay + by) / 2;
        ctx.moveTo((ax - view.x) * k, (ay - view.y) * k);
        ctx.bezierCurveTo((ax - view.x) * k, (my - view.y) * k, (bx - view.x) * k, (my - view.y) * k, (bx - view.x) * k, (by - view.y) * k);
      }
      ctx.stroke();
    }
    const labels = k >= 0.45;
    ctx.font = `${Math.max(9, Math.min(14, 12 * k))}px system-ui, sans-serif`;
    ctx.textBaseline = "middle";
    let drawn = 0;
    for (let i = 0; i < n; i++) {
      if (!inView(i)) continue;
      drawn++;
      const f = g.flags[i];
      const sx = (wx(i) - BOX_W / 2 - view.x) * k, sy = (wy(i) - BOX_H / 2 - view.y) * k;
      const bw = Math.max(1, BOX_W * k), bh = Math.max(1, BOX_H * k); // a dot when far out
      ctx.globalAlpha = f & ARCHIVED ? 0.5 : 1;
      ctx.fillStyle = i === g.current ? "#bfdbfe" : f & ON_PATH ? "#dbeafe" : f & MODEL ? "#ecfdf5" : "#ffffff";
      ctx.fillRect(sx, sy, bw, bh);
      ctx.setLineDash(f & ARCHIVED ? [4, 3] : []);
      ctx.lineWidth = i === selected ? 3 : f & (ON_PATH | BOOKMARK) ? 2 : 1;
      ctx.strokeStyle = i === selected ? "#111827" : f & BOOKMARK ? "#d97706" : f & ON_PATH ? "#2563eb" : f & MODEL ? "#059669" : "#64748b";
      ctx.strokeRect(sx, sy, bw, bh);
      ctx.setLineDash([]);
      if (labels) {
        ctx.fillStyle = "#111827";
        const mark = f & BOOKMARK ? "★ " : "";
        ctx.save();
        ctx.beginPath();
        ctx.rect(sx + 3, sy, bw - 6, bh);
        ctx.clip();
        ctx.fillText(mark + (g.label[i].replace(/\s+/g, " ").trim() || "(empty)"), sx + 5, sy + bh / 2);
        ctx.restore();
      }
      ctx.globalAlpha = 1;
    }
    canvas.dataset.drawn = drawn;
    canvas.dataset.frameMs = (performance.now() - t0).toFixed(2);
  }

  function centreOn(i, k) {
    if (k) view.k = k;
    view.x = wx(i) - canvas.clientWidth / 2 / view.k;
    view.y = wy(i) - canvas.clientHeight / 3 / view.k;
    draw();
  }

  function fit() {
    const w = canvas.clientWidth, h = canvas.clientHeight;
    const width = Math.max(0, g.columns - 1) * COL + BOX_W, height = g.depth * ROW + BOX_H;
    view.k = Math.max(MIN_K, Math.min(1.5, (0.95 * w) / width, (0.95 * h) / height));
    view.x = -BOX_W / 2 - (w / view.k - width) / 2;
    view.y = -BOX_H / 2 - (h / view.k - height) / 2;
    draw();
  }

  function zoom(factor, sx, sy) {
    const k = Math.max(MIN_K, Math.min(4, view.k * factor));
    if (sx === undefined) { sx = canvas.clientWidth / 2; sy = canvas.clientHeight / 2; }
    // Keep the world point under the cursor where it is.
    view.x += sx / view.k - sx / k;
    view.y += sy / view.k - sy / k;
    view.k = k;
    draw();
  }

  function hit(sx, sy) {
    const x = sx / view.k + view.x, y = sy / view.k + view.y;
    for (let i = 0; i < g.ids.length; i++) {
      if (Math.abs(wx(i) - x) <= BOX_W / 2 && Math.abs(wy(i) - y) <= BOX_H / 2) return i;
    }
    return -1;
  }

  function select(i) {
    if (i < 0 || i === undefined) return;
    selected = i;
    const left = view.x, top = view.y, w = canvas.clientWidth / view.k, h = canvas.clientHeight / view.k;
    if (wx(i) < left + BOX_W || wx(i) > left + w - BOX_W || wy(i) < top + BOX_H || wy(i) > top + h - BOX_H) centreOn(i);
    status.textContent = `Node ${g.ids[i]}: ${g.label[i].trim() || "(empty)"}${g.flags[i] & BOOKMARK ? " · bookmarked" : ""}${g.flags[i] & ARCHIVED ? " · archived" : ""} — Enter to read it.`;
    canvas.dataset.selected = g.ids[i];
    draw();
  }

  function read(i) {
    location.href = canvas.dataset.nodeUrl.replace("/0/", `/${g.ids[i]}/`);
  }

  // Pointer: drag pans; a press that barely moves is a click on a box.
  let drag = null;
  canvas.addEventListener("pointerdown", (ev) => {
    drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false };
    canvas.setPointerCapture(ev.pointerId);
  });
  canvas.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 4) { drag.moved = true; canvas.classList.add("dragging"); }
    if (drag.moved) { view.x = drag.vx - dx / view.k; view.y = drag.vy - dy / view.k; draw(); }
  });
  canvas.addEventListener("pointerup", (ev) => {
    const was = drag;
    drag = null;
    canvas.classList.remove("dragging");
    if (!was || was.moved) return;
    const r = canvas.getBoundingClientRect();
    const i = hit(ev.clientX - r.left, ev.clientY - r.top);
    if (i >= 0) read(i);
  });
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    zoom(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });

  canvas.addEventListener("keydown", (ev) => {
    if (!g || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const i = selected;
    const siblings = g.parent[i] >= 0 ? kids[g.parent[i]] : [i];
    const at = siblings.indexOf(i);
    const keys = {
      ArrowUp: () => select(g.parent[i]),
      ArrowDown: () => select(kids[i][0]),
      ArrowLeft: () => select(siblings[at - 1]),
      ArrowRight: () => select(siblings[at + 1]),
      Enter: () => read(i),
      "+": () => zoom(1.25), "=": () => zoom(1.25), "-": () => zoom(0.8),
      c: () => { select(g.current); centreOn(g.current); },
      f: fit,
    };
    if (!keys[ev.key]) return;
    ev.preventDefault();
    keys[ev.key]();
  });

  document.addEventListener("click", (ev) => {
    const b = ev.target.closest("[data-graph]");
    if (!b || !g) return;
    const act = b.dataset.graph;
    if (act === "zoom-in") zoom(1.25);
    if (act === "zoom-out") zoom(0.8);
    if (act === "fit") fit();
    if (act === "current") { select(g.current); centreOn(g.current, 1); }
  });

  // The page's own hook for tests and bench/loom_graph.py: the layout in world
  // units and the view, so a box can be found on screen.
  window.weftGraph = {
    screenOf: (id) => {
      const i = g.ids.indexOf(id);
      return { x: (wx(i) - view.x) * view.k, y: (wy(i) - view.y) * view.k };
    },
    centreOn: (id, k) => centreOn(g.ids.indexOf(id), k),
    zoom,
    view: () => ({ ...view }),
  };

  fetch(canvas.dataset.url, { headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
    .then((data) => {
      g = data;
      kids = g.ids.map(() => []);
      g.parent.forEach((p, i) => { if (p >= 0) kids[p].push(i); });
      new ResizeObserver(resize).observe(canvas);
      resize();
      centreOn(g.current, 1);
      select(g.current);
      requestAnimationFrame(() => {
        canvas.dataset.ready = "true";
        performance.mark("weft-graph-drawn");
      });
    })
    .catch((err) => { status.textContent = `The graph could not be loaded (${err.message}). Reload to try again.`; });
})();
