// A chart's numbers as uPlot and the CSV export take them, worked out from its spec
// (core/charts.py) with no page: static/weft/charts.js draws them, tests/js tests them.
const COLOURS = ["#3b5bdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#0c8599", "#c92a2a", "#5c940d", "#495057"];
const DASHES = { dash: [7, 4], dot: [2, 3] };
const HATCHES = ["solid", "diag", "dots", "back", "horiz", "cross", "vert", "grid"];

export const withUnit = (s) => (s.unit ? `${s.label} (${s.unit})` : s.label);

// One series' look, the same in the plot, the legend and the PNG.
export function looks(spec) {
  let bars = 0;
  return spec.series.map((s, i) => ({
    colour: COLOURS[i % COLOURS.length],
    dash: DASHES[s.style] || [],
    hatch: s.style === "bars" ? HATCHES[bars++ % HATCHES.length] : null,
  }));
}

// uPlot's data: the x column, then each series (cumulated when stacked, drawn top
// segment first so each lower one covers it from the axis up).
export function columns(spec) {
  const order = spec.series.map((_, i) => i);
  // An empty bar is not drawn (a zero would show as a stroke on the axis); the
  // readout, the table and the CSV still say 0.
  const values = spec.series.map((s) => (s.style === "bars" ? s.values.map((v) => (v === 0 ? null : v)) : s.values));
  if (spec.stacked) {
    // Only the bars stack; lines (a budget's burn-down) keep their own values.
    const bars = order.filter((i) => spec.series[i].style === "bars");
    const lines = order.filter((i) => spec.series[i].style !== "bars");
    const sums = {};
    let run = spec.x.map(() => null);
    bars.forEach((i) => {
      run = values[i].map((v, k) => (v == null && run[k] == null ? null : (run[k] || 0) + (v || 0)));
      sums[i] = run;
    });
    const drawn = [...bars.reverse(), ...lines];
    return { order: drawn, data: [spec.x, ...drawn.map((i) => (i in sums ? sums[i] : values[i]))] };
  }
  return { order, data: [spec.x, ...values] };
}

// The figure's data as CSV, the way the table shows it (values as given, not stacked).
export function csv(spec) {
  const cell = (v) => {
    const text = v == null ? "" : String(v);
    return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  const head = [spec.x_label, ...(spec.x_names ? [spec.names_label || "label"] : []), ...spec.series.map(withUnit)];
  const lines = [head.map(cell).join(",")];
  spec.x.forEach((x, i) => {
    const row = [x, ...(spec.x_names ? [spec.x_names[i]] : []), ...spec.series.map((s) => s.values[i])];
    lines.push(row.map(cell).join(","));
  });
  return lines.join("\n") + "\n";
}
