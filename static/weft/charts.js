// The charts every page shares. core/charts.py describes a chart (title, axes, units,
// series, marks, links to token chips, a bar filter); templates/kit/_chart.html holds
// it with its spec (json_script) and the same numbers as a table; this draws it with
// uPlot (static/vendor/uplot) and adds what a reader needs around the plot:
//
// - a legend and a readout written with textContent (labels may be model-written
//   tokens: they only ever reach a canvas or a text node);
// - series told apart without colour: dash patterns for lines, hatchings for bars;
// - the keyboard: the plot is focusable, arrows (Home/End, PageUp/PageDown) move
//   along it, Enter on a bar applies its filter, Escape leaves;
// - hover linking: the point under the cursor highlights its chip (`links`), and a
//   chip under the mouse or focus moves the cursor to its point;
// - export: the figure as PNG (title, legend, plot) and its data as CSV;
// - a bar filter: a click (or Enter) loads the filter's URL into its target (htmx).
//
// What the plot is given (the columns, each series' look, the CSV) is worked out in
// static/weft/chartdata.js, without a page. weft.charts.draw(figure) draws one figure
// (bench/charts.py times it; static/weft/hooks.js).
import { columns, csv, looks, withUnit } from "./chartdata.js";
import { hooks } from "./hooks.js";

const MARK = "#e67700";
const live = new Map(); // figure id -> entry
const INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6];

const fmt = (v, d) =>
  v == null ? "—" : v.toLocaleString("en", { minimumFractionDigits: d, maximumFractionDigits: d });
const short = (text, n) => (text.length > n ? text.slice(0, n - 1) + "…" : text);

function hatch(ctx, kind, colour) {
  if (kind === "solid") return colour + "aa";
  const tile = document.createElement("canvas");
  tile.width = tile.height = 8;
  const g = tile.getContext("2d");
  g.fillStyle = colour + "2e";
  g.fillRect(0, 0, 8, 8);
  g.strokeStyle = g.fillStyle = colour;
  g.lineWidth = 1.4;
  g.beginPath();
  const line = (x0, y0, x1, y1) => { g.moveTo(x0, y0); g.lineTo(x1, y1); };
  if (kind === "diag" || kind === "cross") { line(0, 8, 8, 0); line(-2, 2, 2, -2); line(6, 10, 10, 6); }
  if (kind === "back" || kind === "cross") { line(0, 0, 8, 8); line(6, -2, 10, 2); line(-2, 6, 2, 10); }
  if (kind === "horiz" || kind === "grid") line(0, 4, 8, 4);
  if (kind === "vert" || kind === "grid") line(4, 0, 4, 8);
  g.stroke();
  if (kind === "dots") { g.beginPath(); g.arc(4, 4, 1.7, 0, 2 * Math.PI); g.fill(); }
  return ctx.createPattern(tile, "repeat");
}

function swatch(g, look, x, y, w, h) {
  g.save();
  if (look.hatch) {
    g.fillStyle = hatch(g, look.hatch, look.colour);
    g.fillRect(x, y, w, h);
    g.strokeStyle = look.colour;
    g.lineWidth = 1;
    g.strokeRect(x + 0.5, y + 0.5, w - 1, h - 1);
  } else {
    g.strokeStyle = look.colour;
    g.lineWidth = 2;
    g.setLineDash(look.dash);
    g.beginPath();
    g.moveTo(x, y + h / 2);
    g.lineTo(x + w, y + h / 2);
    g.stroke();
  }
  g.restore();
}

function legend(entry) {
  const box = entry.fig.querySelector(".chart-legend");
  if (!box) return;
  box.replaceChildren();
  entry.spec.series.forEach((s, i) => {
    const key = document.createElement("span");
    key.className = "chart-key";
    const c = document.createElement("canvas");
    c.width = 26;
    c.height = 12;
    swatch(c.getContext("2d"), entry.looks[i], 1, 1, 24, 10);
    const label = document.createElement("span");
    label.textContent = withUnit(s) + (s.axis === "y2" ? " → right axis" : "");
    key.append(c, label);
    box.append(key);
  });
  if (entry.spec.marks.length) {
    const key = document.createElement("span");
    key.className = "chart-key mark";
    key.textContent = "┆ " + [...new Set(entry.spec.marks.map((m) => m.label))].join(", ");
    box.append(key);
  }
}

function tickNames(spec, index) {
  if (!spec.x_names || spec.x_ticks === "numbers") return undefined;
  return (u, splits) =>
    splits.map((v) => {
      const i = index.get(v);
      if (i == null) return spec.x_ticks === "names" ? "" : String(v);
      const name = short((spec.tick_names || spec.x_names)[i], 10);
      return spec.x_ticks === "names" ? name : `${v}\n${name}`;
    });
}

function options(entry, width) {
  const { spec, looks: look, order } = entry;
  const bars = spec.kind === "bars";
  const uses2 = spec.series.some((s) => s.axis === "y2");
  const axisStyle = { stroke: "#6b6a64", grid: { stroke: "#eeece6" }, ticks: { stroke: "#dedad0" },
    font: "11px system-ui, sans-serif", labelFont: "12px system-ui, sans-serif" };
  const names = tickNames(spec, entry.index);
  const range = (fixed) => (u, min, max) => {
    if (fixed) return fixed;
    if (min == null || max == null) return [0, 1];
    const lo = Math.min(0, min);
    const hi = max > lo ? max + (max - lo) * 0.05 : lo + 1;
    return [lo, hi];
  };
  return {
    width,
    height: spec.height,
    legend: { show: false },
    cursor: {
      sync: spec.sync ? { key: spec.sync } : undefined,
      drag: { x: !bars, y: false },
      points: { size: 7, width: 2 },
    },
    scales: {
      x: { time: false, range: bars ? (u, min, max) => [min - 0.5, max + 0.5] : undefined },
      y: { range: range(spec.y_range) },
      y2: { range: range(null) },
    },
    axes: [
      { ...axisStyle, label: spec.x_label, values: names, incrs: INCRS, space: names ? 46 : 50,
        size: names && spec.x_ticks === "both" ? 58 : 44 },
      { ...axisStyle, label: spec.y_label, scale: "y", size: 56 },
      ...(uses2 ? [{ ...axisStyle, label: spec.y2_label, scale: "y2", side: 1, size: 64, grid: { show: false } }] : []),
    ],
    series: [
      { label: spec.x_label },
      ...order.map((i) => {
        const s = spec.series[i];
        const o = { label: s.label, scale: s.axis, stroke: look[i].colour, width: 1.6, dash: look[i].dash,
          spanGaps: false, points: { show: s.style === "points" ? true : undefined, size: 5 } };
        if (s.style === "bars") {
          o.paths = uPlot.paths.bars({ size: [0.8, 80], gap: 1 });
          const kind = look[i].hatch;
          o.fill = (u) => hatch(u.ctx, kind, look[i].colour);
          o.width = 1;
          o.points = { show: false };
        } else if (s.style === "step") {
          o.paths = uPlot.paths.stepped({ align: 1 });
          o.points = { show: false };
        } else if (s.style === "points") {
          o.paths = () => null;
          o.points = { show: true, size: 6, fill: look[i].colour };
        }
        return o;
      }),
    ],
    hooks: {
      draw: [(u) => drawMarks(entry, u)],
      setCursor: [(u) => onCursor(entry, u.cursor.idx)],
    },
  };
}

function drawMarks(entry, u) {
  entry.drawnAt = entry.drawnAt || performance.now(); // the first draw's end (bench/charts.py)
  const g = u.ctx;
  const pr = devicePixelRatio || 1;
  const { top, height, left, width } = u.bbox;
  g.save();
  g.textAlign = "left";
  g.textBaseline = "alphabetic";
  for (const m of entry.spec.marks) {
    const x = Math.round(u.valToPos(m.x, "x", true));
    if (x < left || x > left + width) continue;
    g.strokeStyle = g.fillStyle = MARK;
    g.lineWidth = 1.5 * pr;
    g.setLineDash([4 * pr, 3 * pr]);
    g.beginPath();
    g.moveTo(x, top);
    g.lineTo(x, top + height);
    g.stroke();
    g.font = `${11 * pr}px system-ui, sans-serif`;
    // Beside the line, on whichever side has room.
    const room = g.measureText(m.label).width + 6 * pr;
    g.textAlign = x + room > left + width ? "right" : "left";
    g.fillText(m.label, g.textAlign === "right" ? x - 3 * pr : x + 3 * pr, top + 12 * pr);
  }
  if (entry.selected != null) {
    // The bar the table is filtered by: outlined, so it shows without colour.
    const x = entry.spec.x[entry.selected];
    const half = (u.valToPos(x + 0.45, "x", true) - u.valToPos(x - 0.45, "x", true)) / 2;
    const mid = u.valToPos(x, "x", true);
    g.setLineDash([]);
    g.strokeStyle = "#1d1d1b";
    g.lineWidth = 2.5 * pr;
    g.strokeRect(mid - half, top + 1, 2 * half, height - 2);
  }
  g.restore();
}

function readout(entry, idx) {
  const el = entry.fig.querySelector(".chart-readout");
  if (!el) return;
  if (idx == null) {
    el.textContent = entry.filterNote || "";
    return;
  }
  const { spec } = entry;
  const name = spec.x_names ? spec.x_names[idx] : null;
  const head = `${spec.x_label} ${spec.x[idx]}` + (name != null && String(name) !== String(spec.x[idx]) ? ` · ${JSON.stringify(name)}` : "");
  const values = spec.series.map((s) => `${s.label} ${fmt(s.values[idx], s.decimals)}${s.unit ? " " + s.unit : ""}`);
  const marks = spec.marks.filter((m) => m.x === spec.x[idx]).map((m) => m.label);
  el.textContent = [head, ...values, ...marks].join(" · ");
}

function chipsAt(entry, idx) {
  const x = entry.spec.x[idx];
  const found = [];
  for (const link of entry.spec.links) {
    const box = document.querySelector(link.target);
    const chip = box && box.querySelector(`[data-${link.attr}="${CSS.escape(String(x))}"]`);
    if (chip) found.push(chip);
  }
  return found;
}

function onCursor(entry, idx) {
  readout(entry, idx);
  entry.hit.forEach((chip) => chip.classList.remove("chart-hit"));
  entry.hit = idx == null ? [] : chipsAt(entry, idx);
  entry.hit.forEach((chip) => chip.classList.add("chart-hit"));
}

// Put the cursor on point idx (keyboard, or a chip): its first known value gives the
// height, so the point marker sits on the line.
function moveTo(entry, idx) {
  const u = entry.u;
  if (idx == null) {
    u.setCursor({ left: -10, top: -10 });
    return;
  }
  let top = u.bbox.height / (devicePixelRatio || 1) / 2;
  for (let k = 1; k < entry.data.length; k++) {
    const v = entry.data[k][idx];
    if (v != null) {
      top = u.valToPos(v, u.series[k].scale);
      break;
    }
  }
  u.setCursor({ left: u.valToPos(entry.spec.x[idx], "x"), top });
}

function applyFilter(entry, idx) {
  const f = entry.spec.filter;
  if (!f || idx == null || !window.htmx) return;
  const url = `${f.url}${f.url.includes("?") ? "&" : "?"}${encodeURIComponent(f.param)}=${encodeURIComponent(f.values[idx])}`;
  entry.selected = idx;
  entry.filterNote = `Table filtered to ${entry.spec.x_label} ${entry.spec.x_names ? entry.spec.x_names[idx] : entry.spec.x[idx]}.`;
  entry.u.redraw(false);
  htmx.ajax("GET", url, { target: f.target, swap: "outerHTML" });
  readout(entry, null);
}

function onKey(entry, e) {
  const n = entry.spec.x.length;
  if (!n) return;
  const at = entry.u.cursor.idx;
  const steps = { ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1, PageUp: 10, PageDown: -10 };
  let idx;
  if (e.key in steps) idx = Math.max(0, Math.min(n - 1, (at == null ? -1 : at) + steps[e.key]));
  else if (e.key === "Home") idx = 0;
  else if (e.key === "End") idx = n - 1;
  else if ((e.key === "Enter" || e.key === " ") && entry.spec.filter) {
    e.preventDefault();
    applyFilter(entry, at == null ? 0 : at);
    return;
  } else if (e.key === "Escape") {
    moveTo(entry, null);
    return;
  } else return;
  e.preventDefault();
  moveTo(entry, idx);
}

function download(blob, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

function png(entry) {
  const src = entry.u.ctx.canvas;
  const pr = devicePixelRatio || 1;
  const head = Math.round(46 * pr);
  const out = document.createElement("canvas");
  out.width = src.width;
  out.height = src.height + head;
  const g = out.getContext("2d");
  g.fillStyle = "#fff";
  g.fillRect(0, 0, out.width, out.height);
  g.fillStyle = "#1d1d1b";
  g.textAlign = "left";
  g.textBaseline = "alphabetic";
  g.font = `600 ${13 * pr}px system-ui, sans-serif`;
  g.fillText(entry.spec.title, 8 * pr, 17 * pr);
  g.font = `${11 * pr}px system-ui, sans-serif`;
  let x = 8 * pr;
  entry.spec.series.forEach((s, i) => {
    swatch(g, entry.looks[i], x, 29 * pr, 22 * pr, 10 * pr);
    x += 26 * pr;
    g.fillStyle = "#1d1d1b";
    const label = withUnit(s);
    g.fillText(label, x, 38 * pr);
    x += g.measureText(label).width + 14 * pr;
  });
  g.drawImage(src, 0, head);
  return new Promise((done) => out.toBlob(done, "image/png"));
}

async function exportAs(entry, kind) {
  if (kind === "csv") download(new Blob([csv(entry.spec)], { type: "text/csv" }), `${entry.spec.filename}.csv`);
  else download(await png(entry), `${entry.spec.filename}.png`);
}

// A chart re-rendered in place (the Batch page's socket redraws them as prompts
// finish) keeps what its reader had: the selected bar, and the keyboard focus with
// the cursor's point, noted just before the swap.
const kept = new Map();
function note() {
  for (const [id, entry] of live) {
    const plot = entry.fig.querySelector(".chart-plot");
    const focused = plot && plot.contains(document.activeElement);
    kept.set(id, { selected: entry.selected, filterNote: entry.filterNote, focused, idx: entry.u.cursor.idx });
  }
}

function restore(entry) {
  const was = kept.get(entry.fig.id);
  if (!was) return;
  kept.delete(entry.fig.id);
  if (entry.selected == null && was.selected != null && was.selected < entry.spec.x.length) {
    entry.selected = was.selected;
    entry.filterNote = was.filterNote;
    entry.u.redraw(false);
    readout(entry, null);
  }
  if (was.focused) {
    entry.fig.querySelector(".chart-plot").focus({ preventScroll: true });
    if (was.idx != null && was.idx < entry.spec.x.length) moveTo(entry, was.idx);
  }
}

function prune() {
  for (const [id, entry] of live) {
    if (!entry.fig.isConnected) {
      entry.u.destroy();
      entry.resize.disconnect();
      entry.hit.forEach((chip) => chip.classList.remove("chart-hit"));
      live.delete(id);
    }
  }
}

function draw(fig, measured) {
  const script = fig.querySelector("script[type='application/json']");
  const plot = fig.querySelector(".chart-plot");
  if (!script || !plot || !window.uPlot) return null;
  fig.dataset.ready = "1";
  const spec = JSON.parse(script.textContent);
  const { order, data } = columns(spec);
  const entry = { fig, spec, order, data, looks: looks(spec), hit: [], selected: null, filterNote: "",
    index: new Map(spec.x.map((x, i) => [x, i])) };
  if (spec.filter && spec.filter.selected != null) {
    entry.selected = spec.filter.selected;
    entry.filterNote = `Table filtered to ${spec.x_label} ${spec.x_names ? spec.x_names[entry.selected] : ""}.`;
  }
  const width = measured || plot.clientWidth || 640;
  entry.u = new uPlot(options(entry, width), data, plot);
  legend(entry);
  readout(entry, null);
  plot.addEventListener("keydown", (e) => onKey(entry, e));
  plot.addEventListener("blur", () => moveTo(entry, null));
  if (spec.filter) {
    entry.u.over.addEventListener("click", () => applyFilter(entry, entry.u.cursor.idx));
    entry.u.over.style.cursor = "pointer";
  }
  entry.resize = new ResizeObserver(() => {
    const w = plot.clientWidth;
    if (w && Math.abs(w - entry.u.width) > 1) entry.u.setSize({ width: w, height: spec.height });
  });
  entry.resize.observe(plot);
  live.set(fig.id, entry);
  return entry;
}

// The filtered table came back (a bar, "show all", a page): its data-filter says
// which bar it is filtered by, so the outline follows the table, not the last click.
function followFilter(root) {
  if (!root.matches) return;
  for (const entry of live.values()) {
    const f = entry.spec.filter;
    if (!f || !root.matches(f.target) || root.dataset.filter == null) continue;
    const [param, value] = root.dataset.filter.split("=");
    const idx = param === f.param ? f.values.indexOf(value) : -1;
    entry.selected = idx >= 0 ? idx : null;
    entry.filterNote = idx >= 0 ? `Table filtered to ${entry.spec.x_label} ${entry.spec.x_names[idx]}.` : "";
    entry.u.redraw(false);
    readout(entry, null);
  }
}

function init(root) {
  prune();
  followFilter(root);
  const figs = root.matches && root.matches("figure[data-chart]") ? [root] : [];
  figs.push(...(root.querySelectorAll ? root.querySelectorAll("figure[data-chart]") : []));
  // Every width first, in one layout; drawing one chart and then measuring the next
  // would lay the page out again for each (16 small multiples: 16 layouts).
  const todo = figs.filter((fig) => !fig.dataset.ready);
  const widths = todo.map((fig) => (fig.querySelector(".chart-plot") || fig).clientWidth);
  todo.forEach((fig, i) => {
    const entry = draw(fig, widths[i]);
    if (entry) restore(entry);
  });
  kept.clear();
}

// A chip under the mouse or focus puts the cursor on its point, in every chart
// linked to its container.
function fromChip(event, leaving) {
  const chip = event.target.closest && event.target.closest(".tok");
  if (!chip) return;
  for (const entry of live.values()) {
    for (const link of entry.spec.links) {
      const box = chip.closest(link.target);
      const x = chip.getAttribute(`data-${link.attr}`);
      if (!box || x == null || x === "") continue;
      const idx = leaving ? null : entry.index.get(Number(x));
      if (leaving || idx != null) moveTo(entry, idx);
    }
  }
}

document.addEventListener("mouseover", (e) => fromChip(e, false));
document.addEventListener("focusin", (e) => fromChip(e, false));
document.addEventListener("mouseout", (e) => fromChip(e, true));
document.addEventListener("focusout", (e) => fromChip(e, true));
document.addEventListener("click", (e) => {
  const button = e.target.closest && e.target.closest("[data-chart-export]");
  if (!button) return;
  const entry = live.get(button.closest("figure[data-chart]").id);
  if (entry) exportAs(entry, button.dataset.chartExport);
});
document.addEventListener("DOMContentLoaded", () => init(document));
for (const name of ["htmx:beforeSwap", "htmx:oobBeforeSwap", "htmx:wsBeforeMessage"]) {
  document.addEventListener(name, note);
}
document.addEventListener("htmx:load", (e) => init(e.target));
document.addEventListener("htmx:oobAfterSwap", (e) => init(e.detail.target || document));

hooks.charts = { draw, init, csv: (id) => csv(live.get(id).spec), entry: (id) => live.get(id) };
