// The one window global, `window.weft`: hooks for the browser tests and bench/ —
// `weft.graph` (static/weft/loomgraph.js), `weft.live` (loomlive.js) and `weft.charts`
// (charts.js). The scripts never read it to talk to each other: they import what they
// need. htmx and its ws extension stay classic scripts with their own `htmx` global.
export const hooks = globalThis.weft || (globalThis.weft = {});
