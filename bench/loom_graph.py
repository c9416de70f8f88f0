"""The Loom's whole-tree views at 10,000 nodes, in Chromium, beside the reader.

    .venv/bin/python bench/loom_graph.py [--nodes 10000] [--repeat 5]

Starts its own Postgres, Redis and ASGI server (bench/stack.py), builds a
--nodes tree shaped like bench/loom_tree.py's bushy tree (each node's parent
drawn from the 2,000 most recent: bushy and some tens of levels deep) and a
--nodes-deep chain, then drives Debian's Chromium (tests/support.py's launch
arguments) and reports, as p50 / p95 over --repeat runs:

  * baseline: the reader page at the deepest node (navigation to load event);
  * the graph page's first paint: navigation start to the first frame drawn
    with the whole layout (the page's own `weft-graph-drawn` mark; the data
    request and the layout computed in the page included) — target ≤ 500 ms;
  * pan and zoom frames (each frame's drawing, timed in the page) at the scale
    the graph opens at and with the whole tree fitted in view, and the interval
    between frames of a 60-frame pan paced by the browser — target ≤ 16 ms (near
    the fit a big tree moves as one picture of itself; once the view rests it is
    drawn in full again, every box, timed too);
  * navigation: a click on a box to the reader showing that node;
  * the server side: the layout's JSON (bytes, ms) beside the reader's HTML,
    the outline's share of the reader, and the trees page (its figures, and
    the depths it asks for next), through Django's test client.

Ratios are against the reader page measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stack import percentile, start_services, start_web  # noqa: E402
from launch.datadir import scratch_dir  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402


def p(values: list[float]) -> str:
    return f"{percentile(values, 0.5):8.1f} {percentile(values, 0.95):8.1f}"


def server_ms(client, url: str, repeat: int) -> tuple[float, int]:
    client.get(url)
    samples, size = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        samples.append((time.perf_counter() - t0) * 1000)
        size = len(body)
    return percentile(samples, 0.5), size


# A pan of 60 frames paced by requestAnimationFrame: each frame moves the view and
# draws it (weft.graph.frame() times the drawing); the intervals are the frame times.
PAN_JS = """async () => {
  const g = window.weft.graph, draws = [], gaps = [];
  let last = performance.now();
  for (let i = 0; i < 60; i++) {
    await new Promise((done) => requestAnimationFrame(done));
    const now = performance.now();
    gaps.push(now - last);
    last = now;
    g.pan(i % 20 < 10 ? 12 : -12, i % 40 < 20 ? 6 : -6);
    draws.push(g.frame());
  }
  return { draws, gaps: gaps.slice(1) };
}"""


def browser_figures(
    page, base: str, tree, deep: int, target: int, repeat: int
) -> dict[str, list[float]]:
    keys = (
        "reader",
        "graph",
        "fetch",
        "layout",
        "fullfit",
        "zoomall",
        "panall",
        "gapall",
        "fullall",
        "zoom1",
        "zoomfit",
        "pan1",
        "panfit",
        "gap1",
        "gapfit",
        "click",
    )
    out: dict[str, list[float]] = {k: [] for k in keys}
    reader_url = f"{base}/loom/{tree.pk}/n/{deep}/"
    graph_url = f"{base}/loom/{tree.pk}/graph/"
    for _ in range(repeat):
        page.goto(reader_url, wait_until="load")
        page.wait_for_selector(f'#loom-reader[data-node="{deep}"]')
        out["reader"].append(
            page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
        )
        page.goto(graph_url)
        page.wait_for_selector('#loom-graph[data-ready="true"]', timeout=60_000)
        out["graph"].append(
            page.evaluate("performance.getEntriesByName('weft-graph-drawn')[0].startTime")
        )
        graph = page.locator("#loom-graph")
        out["fetch"].append(float(graph.get_attribute("data-fetch-ms")))
        out["layout"].append(float(graph.get_attribute("data-layout-ms")))
        # Zoom and pan frames as opened (labels drawn), then with the whole tree in view.
        for fit, zoom_key, pan_key, gap_key in ((False, "zoom1", "pan1", "gap1"),
                                                (True, "zoomfit", "panfit", "gapfit")):  # fmt: skip
            if fit:
                page.get_by_role("button", name="Fit the whole tree").click()
            for i in range(10):
                page.evaluate(f"window.weft.graph.zoom({1.02 if i % 2 else 1 / 1.02})")
                out[zoom_key].append(page.evaluate("window.weft.graph.frame()"))
            got = page.evaluate(PAN_JS)
            out[pan_key] += got["draws"]
            out[gap_key] += got["gaps"]
            if fit:  # the full draw once the view rests (every box, sharp)
                out["fullfit"] += [page.evaluate("window.weft.graph.full()") for _ in range(5)]
        # The worst case: every fold opened, all 10,000 boxes in view at fit.
        page.evaluate("window.weft.graph.openAll()")
        page.wait_for_timeout(300)  # the picture it moves as is drawn ahead
        for i in range(10):
            page.evaluate(f"window.weft.graph.zoom({1.02 if i % 2 else 1 / 1.02})")
            out["zoomall"].append(page.evaluate("window.weft.graph.frame()"))
        got = page.evaluate(PAN_JS)
        out["panall"] += got["draws"]
        out["gapall"] += got["gaps"]
        out["fullall"] += [page.evaluate("window.weft.graph.full()") for _ in range(5)]
        page.get_by_role("button", name="Back to the current node").click()
        page.wait_for_timeout(50)
        canvas = page.locator("#loom-graph").bounding_box()
        at = page.evaluate(f"window.weft.graph.screenOf({target})")
        t0 = time.perf_counter()
        page.mouse.click(canvas["x"] + at["x"], canvas["y"] + at["y"])
        page.wait_for_selector(f'#loom-reader[data-node="{target}"]')
        page.wait_for_load_state("load")
        out["click"].append((time.perf_counter() - t0) * 1000)
    return out


def outline_ms(tree, node_id: int) -> float:
    """The outline's share of the reader page (loom.tree_views.outline_context), p50."""
    from loom.models import Node
    from loom.tree_views import outline_context

    node = Node.objects.get(pk=node_id)
    samples = []
    for _ in range(20):
        t0 = time.perf_counter()
        outline_context(tree, node)
        samples.append((time.perf_counter() - t0) * 1000)
    return percentile(samples, 0.5)


def tree_parent_of(node_id: int) -> int:
    from loom.models import Node

    return Node.objects.filter(pk=node_id).values_list("parent_id", flat=True).get()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    sup = Supervisor()
    scratch = scratch_dir("weft-bench-graph-")  # as root, the services' user writes here
    try:
        env = start_services(scratch, sup)
        os.environ.update(env)
        os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1")
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.test import Client
        from playwright.sync_api import sync_playwright

        from bench.loom_tree import build_bushy, build_chain
        from tests.support import CHROMIUM, CHROMIUM_ARGS

        user = get_user_model().objects.create_user("bench", password="bench-password-long")
        rng = random.Random(7)
        bushy, bushy_deep, bushy_depth = build_bushy(user, args.nodes, rng)
        chain, chain_deep, _ = build_chain(user, args.nodes - 1, rng)
        from loom.models import Tree

        Tree.objects.filter(pk=bushy.pk).update(current=bushy_deep)
        Tree.objects.filter(pk=chain.pk).update(current=chain_deep)
        client = Client()
        client.force_login(user)
        cookie = client.cookies["sessionid"].value
        web = start_web(sup, env, 17000 + os.getpid() % 1000)
        uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"uptime: {uptime}")

        print(f"\nserver side ({args.repeat * 4} requests each, test client, p50)")
        print(f"{'':54} {'ms':>8} {'bytes':>10}")
        for label, tree, deep in (
            (f"{args.nodes:,}-node tree (depth {bushy_depth})", bushy, bushy_deep),
            (f"{args.nodes:,}-deep chain", chain, chain_deep),
        ):
            for what, url in (
                ("reader page", f"/loom/{tree.pk}/n/{deep}/"),
                ("graph layout JSON", f"/loom/{tree.pk}/graph/data/"),
            ):
                ms, size = server_ms(client, url, args.repeat * 4)
                print(f"{label + ', ' + what:54.54} {ms:8.1f} {size:10,}")
            print(f"{label + ', the outline alone':54.54} {outline_ms(tree, deep):8.1f}")
        for what, url in (
            ("trees page: both trees, count and last visit", "/loom/"),
            ("trees page's second request: both trees' depths", "/loom/depths/"),
        ):
            ms, size = server_ms(client, url, args.repeat * 4)
            print(f"{what:54} {ms:8.1f} {size:10,}")

        # The box clicked is the deepest node's parent (read here: no ORM inside Playwright's loop).
        # In the chain only the ends are boxes (the rest is one folded box): its current
        # node is clicked there.
        runs = [
            (f"{args.nodes:,}-node tree", bushy, bushy_deep, tree_parent_of(bushy_deep)),
            (f"{args.nodes:,}-deep chain", chain, chain_deep, chain_deep),
        ]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            context.add_cookies(
                [{"name": "sessionid", "value": cookie, "domain": "127.0.0.1", "path": "/"}]
            )
            page = context.new_page()
            for label, tree, deep, target in runs:
                got = browser_figures(page, web, tree, deep, target, args.repeat)
                base = percentile(got["reader"], 0.5)
                print(f"\nChromium, {label} ({args.repeat} runs; ms)")
                print(f"{'':52} {'p50':>8} {'p95':>8} {'max':>8} {'÷ reader':>9} target")
                for key, what, goal in (
                    ("reader", "baseline: reader page, navigation to load", None),
                    ("graph", "graph page: navigation to first full paint", 500),
                    ("fetch", "  of which: the data request (JSON, parsed)", None),
                    ("layout", "  of which: the layout, in the page", None),
                    ("zoom1", "zoom frame as opened (labels drawn; drawing)", 16),
                    ("pan1", "pan frame as opened (drawing)", 16),
                    ("gap1", "  pan, browser frame interval (60 frames)", None),
                    ("zoomfit", "zoom frame, whole tree in view (drawing)", 16),
                    ("panfit", "pan frame, whole tree in view (drawing)", 16),
                    ("gapfit", "  pan, browser frame interval (60 frames)", None),
                    ("fullfit", "full draw once the view rests, whole tree (drawing)", None),
                    ("zoomall", "every fold opened, at fit: zoom frame (drawing)", 16),
                    ("panall", "every fold opened, at fit: pan frame (drawing)", 16),
                    ("gapall", "  pan, browser frame interval (60 frames)", None),
                    ("fullall", "every fold opened: full draw at rest (drawing)", None),
                    ("click", "click a box → reader loaded (wall clock)", None),
                ):
                    ratio = percentile(got[key], 0.5) / base
                    verdict = ""
                    if goal is not None:
                        worst = percentile(got[key], 0.95)
                        verdict = f"≤ {goal}: {'yes' if worst <= goal else 'NO'} (p95)"
                    print(f"{what:52} {p(got[key])} {max(got[key]):8.1f} {ratio:9.2f} {verdict}")
            browser.close()
        uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"\nuptime: {uptime}")
    finally:
        from django.db import connections

        connections.close_all()
        sup.stop_all()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
