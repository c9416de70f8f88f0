// The charts' data (static/weft/chartdata.js): what uPlot is given for a spec from
// core/charts.py, each series' look, and the CSV export.
import { test } from "node:test";
import assert from "node:assert/strict";

import { columns, csv, looks } from "../../static/weft/chartdata.js";

const spec = (series, extra = {}) => ({ x: [1, 2, 3], series, stacked: false, ...extra });

test("series go to uPlot in order after the x column; an empty bar is not drawn, a line's zero is", () => {
  const { order, data } = columns(spec([
    { label: "tokens", style: "bars", values: [4, 0, 2] },
    { label: "p", style: "line", values: [0, 0.5, 1] },
  ]));
  assert.deepEqual(order, [0, 1]);
  assert.deepEqual(data, [[1, 2, 3], [4, null, 2], [0, 0.5, 1]]);
});

test("stacked bars are cumulated and drawn top segment first; lines keep their own values", () => {
  const { order, data } = columns(spec([
    { label: "a", style: "bars", values: [1, 0, 3] },
    { label: "b", style: "bars", values: [2, 5, 0] },
    { label: "left", style: "line", values: [10, 8, 7] },
    { label: "c", style: "bars", values: [0, 0, 1] },
  ], { stacked: true }));
  // The last bar series (the top of the stack) first, then the others, then the line.
  assert.deepEqual(order, [3, 1, 0, 2]);
  assert.deepEqual(data[0], [1, 2, 3]);
  assert.deepEqual(data[1], [3, 5, 4]); // a + b + c
  assert.deepEqual(data[2], [3, 5, 3]); // a + b
  assert.deepEqual(data[3], [1, null, 3]); // a (its empty bar stays empty)
  assert.deepEqual(data[4], [10, 8, 7]);
});

test("each series has its own look: dashes for lines, a hatching per bar series", () => {
  const l = looks(spec([
    { style: "bars" }, { style: "dash" }, { style: "bars" }, { style: "line" }, { style: "dot" },
  ]));
  assert.equal(new Set(l.map((x) => x.colour)).size, 5);
  assert.deepEqual(l.map((x) => x.hatch), ["solid", null, "diag", null, null]);
  assert.deepEqual(l[1].dash, [7, 4]);
  assert.deepEqual(l[3].dash, []);
  assert.deepEqual(l[4].dash, [2, 3]);
});

test("the CSV holds the values as given (not stacked), the names column, units, and quotes what needs it", () => {
  const text = csv(spec([
    { label: "tokens", style: "bars", values: [4, 0, 2], unit: "tok" },
    { label: "p", style: "line", values: [0.25, null, 1] },
  ], { stacked: true, x_label: "position", x_names: ["The", 'say "hi"', "a,b"], names_label: "token" }));
  assert.equal(text, [
    "position,token,tokens (tok),p",
    "1,The,4,0.25",
    '2,"say ""hi""",0,',
    '3,"a,b",2,1',
    "",
  ].join("\n"));
});
