// The graph page's layout (static/weft/loomlayout.js), without a page: every node has a
// box, no two boxes overlap, edges run left to right from parent to child, long chains
// fold (but not the current node's), leaf runs pack into few rows.
import { test } from "node:test";
import assert from "node:assert/strict";

import { layout, FOLD_MIN } from "../../static/weft/loomlayout.js";

const BOOKMARK = 2;

// A tree from parent links (-1: a root); node i has id 100 + i.
function tree(parent, { current = 0, flags = null } = {}) {
  return { ids: parent.map((_, i) => 100 + i), parent, flags: flags || parent.map(() => 0), current };
}

function overlaps(L) {
  const { x, y, w, h } = L.items;
  const found = [];
  for (let i = 0; i < x.length; i++) {
    for (let j = i + 1; j < x.length; j++) {
      const apart = x[i] + w[i] <= x[j] || x[j] + w[j] <= x[i] || y[i] + h[i] <= y[j] || y[j] + h[j] <= y[i];
      if (!apart) found.push([i, j]);
    }
  }
  return found;
}

const box = (L, node) => L.item[node];

test("every node of a small tree has its own box, none overlapping, children right of their parent", () => {
  // 0 ─ 1 ─ 3 ─ 5
  //   │   └ 4
  //   └ 2 ─ 6 ─ 7 ─ 8
  const parent = [-1, 0, 0, 1, 1, 3, 2, 6, 7];
  const L = layout(tree(parent), 1200, 800);
  assert.equal(L.items.node.length, parent.length);
  assert.deepEqual(new Set(L.item).size, parent.length);
  assert.deepEqual(overlaps(L), []);
  for (let i = 1; i < parent.length; i++) {
    const p = box(L, parent[i]), c = box(L, i);
    assert.ok(L.items.x[c] >= L.items.x[p] + L.items.w[p], `node ${i} is right of its parent`);
  }
  // One column per level: the two grandchildren 3 and 4 share node 5's parent's level.
  assert.equal(L.items.x[box(L, 3)], L.items.x[box(L, 6)]);
  // An edge per child, from the parent's right edge to the child's left edge.
  assert.equal(L.edges.child.length, parent.length - 1);
  L.edges.x0.forEach((x0, e) => assert.ok(x0 < L.edges.x1[e]));
});

test("a parent sits level with the middle of its children", () => {
  const parent = [-1, 0, 0, 0, 1, 2, 3]; // three children, each with one child: no leaf block
  const L = layout(tree(parent), 1200, 800);
  const mid = (n) => L.items.y[box(L, n)] + L.items.h[box(L, n)] / 2;
  assert.ok(Math.abs(mid(0) - (mid(1) + mid(3)) / 2) < 1e-9);
  assert.ok(mid(1) < mid(2) && mid(2) < mid(3), "siblings stack top to bottom in order");
});

test("subtrees are packed by their outlines, not by their bounding boxes", () => {
  // Root with two children: a deep narrow chain-with-fan (0→1→{3..8}) and a leaf 2 under it.
  // Reingold–Tilford lets leaf 2 sit right below 1 (their level's outline), not below
  // the whole fan of 1's children.
  const parent = [-1, 0, 0, 1, 1, 1, 1, 1, 1, 3, 4, 5, 6, 7, 8];
  const L = layout(tree(parent), 1400, 900);
  assert.deepEqual(overlaps(L), []);
  const gap = L.items.y[box(L, 2)] - L.items.y[box(L, 1)];
  assert.ok(gap > 0 && gap <= 2, `the second child is ${gap} slots below the first`);
});

test("fifty leaf children pack into a block of a few rows, more columns on a smaller screen", () => {
  const parent = [-1, ...Array.from({ length: 50 }, () => 0)];
  const rows = (L) => new Set(parent.slice(1).map((_, i) => L.items.y[box(L, i + 1)])).size;
  const desk = layout(tree(parent), 1200, 800);
  const phone = layout(tree(parent), 390, 300);
  for (const L of [desk, phone]) assert.deepEqual(overlaps(L), []);
  assert.ok(desk.columns > 1 && rows(desk) <= 25, `${rows(desk)} rows for 50 leaves on a desktop`);
  assert.ok(phone.columns > desk.columns && rows(phone) < rows(desk), `${rows(phone)} rows on a phone`);
});

test("a long chain of only children folds into one box, unless it holds the current node or a bookmark", () => {
  const n = FOLD_MIN + 4;
  // 0 → 1 → … → n-1, then two leaves (the chain's end branches).
  const parent = [-1, ...Array.from({ length: n - 1 }, (_, i) => i), n - 1, n - 1];
  const folded = layout(tree(parent), 1200, 800);
  const folds = folded.items.fold.filter((f) => f === 1);
  assert.equal(folds.length, 1);
  const f = folded.items.fold.indexOf(1);
  assert.ok(folded.items.count[f] >= FOLD_MIN);
  assert.ok(folded.items.node.length < parent.length);
  // Every node still maps to a box (its fold's).
  assert.ok([...folded.item].every((b) => b >= 0));

  const atCurrent = layout(tree(parent, { current: 5 }), 1200, 800);
  assert.equal(atCurrent.items.fold.filter(Boolean).length, 0, "a chain holding the current node stays open");
  const flags = parent.map((_, i) => (i === 6 ? BOOKMARK : 0));
  const marked = layout(tree(parent, { flags }), 1200, 800);
  assert.equal(marked.items.fold.filter((x) => x === 1).length, 0, "so does one holding a bookmark");

  const opened = layout(tree(parent), 1200, 800, new Set([folded.items.node[f] + 100]));
  assert.equal(opened.items.fold.filter(Boolean).length, 0, "a fold listed in `unfolded` opens");
  const all = layout(tree(parent), 1200, 800, new Set(), true);
  assert.equal(all.items.node.length, parent.length);
  assert.deepEqual(overlaps(all), []);
});

test("a forest's roots stack one below another", () => {
  const parent = [-1, 0, -1, 2];
  const L = layout(tree(parent), 1200, 800);
  assert.deepEqual(overlaps(L), []);
  assert.equal(L.items.x[box(L, 0)], L.items.x[box(L, 2)]);
  assert.ok(L.items.y[box(L, 2)] > L.items.y[box(L, 1)]);
});
