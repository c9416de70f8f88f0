// The graph page's layout (static/weft/loomgraph.js draws it): a left-to-right tidy
// tree for the screen at hand, computed in the page from the tree's parent links.
//
// - Depth runs left to right, one column per level; siblings stack top to bottom.
// - Subtrees are packed as close as their outlines allow (Reingold–Tilford by contours,
//   merged small-into-large so a deep chain costs its length, not its length squared).
// - Leaf siblings next to each other are packed into a block of `c` columns a level
//   (spilling over into the next `span` - 1 levels where they are free): a node with
//   fifty leaf children takes a few rows, not fifty. Several shapes are tried and the
//   one whose smallest box is largest on this screen is kept.
// - A long chain of only children (FOLD_MIN or more) folds into one box with a count,
//   unless it holds the current node or a bookmark; and a tree too big for its boxes
//   to be seen at once folds its subtrees beyond the depth that fits (the current
//   path excepted), each one box with a count. `unfolded` lists the folds opened.
const FOLD_MIN = 8;
const GAP = 1; // breadth slots from one subtree to the next (a box is BOX_H tall)
const BOX_H = 0.9;
const X_GAP = 0.6; // slots between a level's boxes and the next level's (the edges)
const CELL_GAP = 0.12; // between two leaves side by side in a block
const COLUMNS = [1, 2, 3, 4, 5, 6];
const SPANS = [1, 2, 3];
const READS_WELL = 18; // px: a box this tall holds its first words; no need to pack more
const SEARCH_MS = 40; // the most time a big tree spends trying shapes (one is always kept)
const SEARCH_ALL = 2000; // nodes up to which every shape is tried
const NODE = 0, FOLD = 1, BLOCK = 2, SUB = 3;
const BOOKMARK = 2, ON_PATH = 8;
const BOX_AREA = 400; // px² a box takes at fit, spacing included: how many fit a screen

// The virtual tree: real nodes, folds (chains as one box) and blocks (leaf runs).
// The depth beyond which subtrees fold: the deepest at which the nodes down to it
// still fit the screen as boxes, in all and level by level (a level is one column of
// rows, a few boxes to a row at most); Infinity: the whole tree does.
function foldDepth(g, kids, roots, w, h) {
  const budget = Math.floor((w * h) / BOX_AREA);
  if (g.ids.length <= budget) return Infinity;
  const perLevel = 3 * Math.floor(h / 10);
  let level = roots.slice(), d = 0, total = 0;
  while (level.length) {
    total += level.length;
    if (total > budget || level.length > perLevel) return Math.max(1, d - 1);
    const next = [];
    for (const r of level) for (const c of kids[r]) next.push(c);
    level = next;
    d++;
  }
  return Infinity;
}

function virtualTree(g, unfolded, w, h, all) {
  const n = g.ids.length;
  // Children lists in one pass, without an array per leaf (most nodes are leaves).
  const kids = new Array(n);
  const NONE = [];
  for (let i = 0; i < n; i++) kids[i] = NONE;
  const roots = [];
  for (let i = 0; i < n; i++) {
    const p = g.parent[i];
    if (p < 0) roots.push(i);
    else if (kids[p] === NONE) kids[p] = [i];
    else kids[p].push(i);
  }
  const deepest = all ? Infinity : foldDepth(g, kids, roots, w, h);
  const special = (r) => r === g.current || (g.flags[r] & BOOKMARK) !== 0;
  const inChain = (r) => g.parent[r] >= 0 && kids[g.parent[r]].length === 1 && kids[r].length === 1 && !special(r);
  const type = [], real = [], count = [], vkids = [], vparent = [];
  const vertexOf = new Int32Array(n).fill(-1);
  const add = (t, r, c, parent) => {
    const v = type.length;
    type.push(t); real.push(r); count.push(c); vkids.push([]); vparent.push(parent);
    if (parent >= 0) vkids[parent].push(v);
    return v;
  };
  // Preorder with an explicit stack (node, its parent's vertex): any depth.
  const stack = [];
  const depth = new Int32Array(n);
  const subtree = (r) => {  // the nodes of r's subtree, r first
    const out = [], todo = [r];
    while (todo.length) { const x = todo.pop(); out.push(x); for (const c of kids[x]) todo.push(c); }
    return out;
  };
  for (let k = roots.length - 1; k >= 0; k--) stack.push(roots[k], -1);
  while (stack.length) {
    const parent = stack.pop();
    let r = stack.pop();
    let v;
    if (depth[r] >= deepest && kids[r].length && !(g.flags[r] & ON_PATH) && !unfolded.has(g.ids[r])) {
      const inside = subtree(r);
      v = add(SUB, r, inside.length, parent);
      for (const x of inside) vertexOf[x] = v;
      continue;
    }
    if (inChain(r) && !(g.parent[r] >= 0 && inChain(g.parent[r]))) {
      let last = r, length = 1;
      while (kids[last].length === 1 && inChain(kids[last][0])) { last = kids[last][0]; length++; }
      if (length >= FOLD_MIN && !all && !unfolded.has(g.ids[r])) {
        v = add(FOLD, r, length, parent);
        for (let x = r, k = 0; k < length; k++, x = kids[x][0]) vertexOf[x] = v;
        r = last;
      }
    }
    if (v === undefined) { v = add(NODE, r, 1, parent); vertexOf[r] = v; }
    for (let k = kids[r].length - 1; k >= 0; k--) {
      depth[kids[r][k]] = depth[r] + 1;
      stack.push(kids[r][k], v);
    }
  }
  // Runs of leaf siblings become blocks (a block of one is a plain leaf).
  const V = type.length;
  for (let v = 0; v < V; v++) {
    const list = vkids[v];
    if (list.length < 2) continue;
    const out = [];
    let run = [];
    const flush = () => {
      if (run.length >= 2) {
        const b = type.length;
        type.push(BLOCK); real.push(-1); count.push(run.length); vkids.push(run); vparent.push(v);
        for (const leaf of run) vparent[leaf] = b;
        out.push(b);
      } else out.push(...run);
      run = [];
    };
    for (const c of list) {
      if ((type[c] === NODE || type[c] === SUB) && vkids[c].length === 0) run.push(c);
      else { flush(); out.push(c); }
    }
    flush();
    vkids[v] = out;
  }
  const vroots = [];
  for (let v = 0; v < type.length; v++) if (vparent[v] < 0) vroots.push(v);
  return { type, real, count, vkids, vparent, vertexOf, vroots, kids };
}

// Reingold–Tilford by contours: each subtree's outline per level (lists kept deepest
// first, so a parent appends itself), the longer list reused when two merge.
function tidy(t, c, span) {
  const V = t.type.length;
  const rowsOf = (v) => (t.type[v] === BLOCK ? Math.ceil(t.count[v] / (c * span)) : 1);
  // How many levels a block reaches over: its columns, c to a level.
  const levelsOf = (v) => (t.type[v] === BLOCK ? Math.ceil(Math.ceil(t.count[v] / rowsOf(v)) / c) : 1);
  const offset = new Float64Array(V); // top relative to the parent's top
  const contour = new Array(V);
  const order = [];
  const stack = t.vroots.slice().reverse();
  while (stack.length) {
    const v = stack.pop();
    order.push(v);
    if (t.type[v] !== BLOCK) for (let k = t.vkids[v].length - 1; k >= 0; k--) stack.push(t.vkids[v][k]);
  }
  for (let o = order.length - 1; o >= 0; o--) {
    const v = order[o];
    const list = t.type[v] === BLOCK ? [] : t.vkids[v];
    if (!list.length) {
      const reach = levelsOf(v);
      contour[v] = { L: new Array(reach).fill(0), R: new Array(reach).fill(rowsOf(v) - 1), add: 0 };
      continue;
    }
    let acc = null;
    const pos = [];
    for (const k of list) {
      const ck = contour[k];
      contour[k] = null;
      if (acc === null) { acc = ck; pos.push(0); continue; }
      const m = Math.min(acc.L.length, ck.L.length);
      let shift = -Infinity;
      for (let d = 0; d < m; d++) {
        const s = acc.R[acc.R.length - 1 - d] + acc.add - (ck.L[ck.L.length - 1 - d] + ck.add) + GAP;
        if (s > shift) shift = s;
      }
      pos.push(shift);
      if (ck.L.length > acc.L.length) {
        const base = { L: ck.L, R: ck.R, add: ck.add + shift };
        for (let d = 0; d < acc.L.length; d++) {
          const j = base.L.length - 1 - d, jj = acc.L.length - 1 - d;
          base.L[j] = Math.min(base.L[j] + base.add, acc.L[jj] + acc.add) - base.add;
          base.R[j] = Math.max(base.R[j] + base.add, acc.R[jj] + acc.add) - base.add;
        }
        acc = base;
      } else {
        for (let d = 0; d < ck.L.length; d++) {
          const j = acc.L.length - 1 - d, jj = ck.L.length - 1 - d;
          acc.L[j] = Math.min(acc.L[j] + acc.add, ck.L[jj] + ck.add + shift) - acc.add;
          acc.R[j] = Math.max(acc.R[j] + acc.add, ck.R[jj] + ck.add + shift) - acc.add;
        }
      }
    }
    // The parent sits level with the middle of its first and last child.
    const mid = (k, p) => p + (rowsOf(k) - 1) / 2;
    const centre = (mid(list[0], pos[0]) + mid(list[list.length - 1], pos[pos.length - 1])) / 2;
    for (let i = 0; i < list.length; i++) offset[list[i]] = pos[i] - centre;
    acc.add -= centre;
    acc.L.push(-acc.add);
    acc.R.push(-acc.add);
    contour[v] = acc;
  }
  // Absolute places, roots one below another.
  const top = new Float64Array(V), level = new Int32Array(V);
  let lo = Infinity, hi = -Infinity, depth = 0, next = 0;
  for (const v of order) {
    const p = t.vparent[v];
    if (p < 0) {
      top[v] = next;
    } else {
      top[v] = top[p] + offset[v];
      level[v] = level[p] + 1;
    }
    const bottom = top[v] + rowsOf(v) - 1;
    if (p < 0) next = bottom + GAP + 2;
    lo = Math.min(lo, top[v]);
    hi = Math.max(hi, bottom);
    depth = Math.max(depth, level[v] + levelsOf(v) - 1);
  }
  return { top, level, lo, hi, levels: depth + 1, breadth: hi - lo + 1, rowsOf };
}

// The smallest box on a w × h screen with this shape fitted (the fit's scale).
function smallest(r, c, w, h) {
  const k = Math.min(h / (r.breadth + 1), w / (r.levels * (c + X_GAP) + 1));
  const levelW = w / k / r.levels;
  const leaf = c > 1 ? ((levelW - X_GAP) / c - CELL_GAP) * k : Infinity;
  return { k, size: Math.min(BOX_H * k, leaf) };
}

// The boxes and edges for a screen of w × h pixels, in world units (a slot = 1).
// `all`: nothing folded (every node its own box).
function layout(g, w, h, unfolded = new Set(), all = false) {
  const t = virtualTree(g, unfolded, w, h, all);
  // The plainest shape whose boxes read well, else the one with the largest boxes.
  let best = null;
  const biggest = t.type.reduce((m, x, v) => (x === BLOCK ? Math.max(m, t.count[v]) : m), 0);
  const shapes = [];
  for (const c of COLUMNS) for (const span of SPANS) if (c * span <= Math.max(2, biggest * 1.5)) shapes.push([c, span]);
  shapes.sort((a, b) => a[0] * a[1] - b[0] * b[1] || a[1] - b[1]);
  let worse = 0;
  const started = performance.now();
  for (const [c, span] of shapes) {
    // A big tree's boxes are small at fit whatever the shape: a few tries are enough
    // (a small tree's search always runs through, the same on any machine).
    if (best && g.ids.length > SEARCH_ALL && performance.now() - started > SEARCH_MS) break;
    const r = tidy(t, c, span);
    const fit = smallest(r, c, w, h);
    if (!best || fit.size > best.size * 1.02) { best = { c, span, r, ...fit }; worse = 0; }
    else worse++;
    // Boxes that read well need no more packing; a big tree stops once two shapes in
    // a row do no better (or its time is up, above).
    if (best.size >= READS_WELL) break;
    if (worse >= 2 && g.ids.length > SEARCH_ALL) break;
  }
  const { c, r } = best;
  const span = best.span;
  // Each level as wide as the screen allows (at least its block's columns).
  const levelW = Math.max(c + X_GAP, Math.min(16, w / best.k / r.levels));
  const boxW = levelW - X_GAP;
  const n = g.ids.length;
  const item = new Int32Array(n).fill(-1); // real node -> its box
  const items = { node: [], fold: [], count: [], x: [], y: [], w: [], h: [], vertex: [] };
  const push = (node, fold, count, x, y, bw) => {
    items.node.push(node); items.fold.push(fold); items.count.push(count);
    items.x.push(x); items.y.push(y); items.w.push(bw); items.h.push(BOX_H);
    return items.node.length - 1;
  };
  const boxOf = new Int32Array(t.type.length).fill(-1);
  const inBlock = (v) => t.vparent[v] >= 0 && t.type[t.vparent[v]] === BLOCK;
  for (let v = 0; v < t.type.length; v++) {
    if (inBlock(v)) continue; // placed with its block
    const x = r.level[v] * levelW, y = r.top[v] - r.lo;
    if (t.type[v] === NODE) {
      boxOf[v] = push(t.real[v], 0, 1, x, y, boxW);
      item[t.real[v]] = boxOf[v];
    } else if (t.type[v] === FOLD || t.type[v] === SUB) {
      // fold: 1, a chain from its first node down; 2, a whole subtree under its node.
      boxOf[v] = push(t.real[v], t.type[v] === FOLD ? 1 : 2, t.count[v], x, y, boxW);
    } else {
      // Row by row, `cols` to a row; every c columns the next level's column.
      const cell = boxW / c;
      const cols = Math.ceil(t.count[v] / r.rowsOf(v));
      t.vkids[v].forEach((leaf, j) => {
        const col = j % cols;
        const lx = x + Math.floor(col / c) * levelW + (col % c) * cell;
        const fold = t.type[leaf] === SUB ? 2 : 0;
        const b = push(t.real[leaf], fold, t.count[leaf], lx, y + Math.floor(j / cols), c > 1 ? cell - CELL_GAP : boxW);
        boxOf[leaf] = b;
        item[t.real[leaf]] = b;
      });
    }
  }
  for (let i = 0; i < n; i++) if (item[i] < 0) item[i] = boxOf[t.vertexOf[i]]; // inside a fold
  // Edges: a parent's right edge to each child's left edge (to a block's middle).
  const edges = { x0: [], y0: [], x1: [], y1: [], child: [] };
  for (let v = 0; v < t.type.length; v++) {
    if (t.type[v] === BLOCK || inBlock(v)) continue;
    const from = boxOf[v];
    const edge = (to, ty) => {
      edges.x0.push(items.x[from] + items.w[from]); edges.y0.push(items.y[from] + BOX_H / 2);
      edges.x1.push(items.x[to]); edges.y1.push(ty + BOX_H / 2);
      edges.child.push(to);
    };
    for (const k of t.vkids[v]) {
      if (t.type[k] !== BLOCK) edge(boxOf[k], items.y[boxOf[k]]);
      else if (Math.ceil(t.count[k] / r.rowsOf(k)) === 1) for (const leaf of t.vkids[k]) edge(boxOf[leaf], items.y[boxOf[leaf]]);
      else edge(boxOf[t.vkids[k][0]], r.top[k] - r.lo + (r.rowsOf(k) - 1) / 2); // to the block's middle
    }
  }
  return {
    items, edges, item, kids: t.kids, vertexOf: t.vertexOf, columns: c, span, levelW, boxH: BOX_H,
    width: r.levels * levelW - X_GAP, height: r.breadth, fitScale: best.k,
  };
}

export { layout, FOLD_MIN };
