// The live tree page's merge rule (static/weft/loomlive.js plan()): what a page does
// with an event from the tree's socket.
import { test } from "node:test";
import assert from "node:assert/strict";

import { plan } from "../../static/weft/loomlive.js";

// A page whose reader shows node 7 and also lists nodes 8 and 9 (children, outline).
const page = (over = {}) => ({
  client: "me", node: "7", shows: (id) => [7, 8, 9].includes(id), busy: () => false, graph: false, ...over,
});
const event = (over = {}) => ({ kind: "event", event: "changed", client: "them", ids: [8], node: 7, html: "<div id='x'></div>", ...over });

test("the echo of this page's own change is ignored (it is shown already)", () => {
  assert.deepEqual(plan(event({ own: true }), page()), { act: "ignore" });
  assert.deepEqual(plan(event({ own: true }), page({ graph: true })), { act: "ignore" });
});

test("the graph page re-reads the tree for anyone else's change, shown or not", () => {
  assert.deepEqual(plan(event({ ids: [1234] }), page({ graph: true, node: null })), { act: "graph" });
});

test("an event about nodes the page does not show changes nothing", () => {
  assert.deepEqual(plan(event({ ids: [40, 41] }), page()), { act: "ignore" });
  assert.deepEqual(plan(event({ ids: undefined }), page()), { act: "ignore" });
  assert.deepEqual(plan(event(), page({ node: null })), { act: "ignore" }, "no reader on the page");
});

test("while the user has something unsaved the update waits", () => {
  let asked = 0;
  const busy = () => { asked += 1; return true; };
  assert.deepEqual(plan(event(), page({ busy })), { act: "wait" });
  assert.equal(asked, 1);
  // Not asked when the event is not for this page.
  plan(event({ ids: [40] }), page({ busy }));
  assert.equal(asked, 1);
});

test("the parts the socket brought are swapped in when they are for the node shown", () => {
  assert.deepEqual(plan(event(), page()), { act: "refresh", whole: false, html: "<div id='x'></div>" });
  // Rendered for another node (the page moved meanwhile): the page asks for its own.
  assert.deepEqual(plan(event({ node: 8 }), page()), { act: "refresh", whole: false, html: "" });
  assert.deepEqual(plan(event({ html: undefined }), page()), { act: "refresh", whole: false, html: "" });
});

test("a generation started or tags changed re-read the whole reader", () => {
  for (const name of ["generating", "tags"]) {
    assert.deepEqual(plan(event({ event: name }), page()), { act: "refresh", whole: true, html: "" });
  }
});
