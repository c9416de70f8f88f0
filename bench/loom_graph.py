"""The Loom's whole-tree views at 10,000 nodes, in Chromium, beside the reader.

    .venv/bin/python bench/loom_graph.py [--nodes 10000] [--repeat 5]

Starts its own Postgres, Redis and ASGI server (bench/stack.py), builds a
--nodes tree shaped like bench/loom_tree.py's bushy tree (each node's parent
drawn from the 2,000 most recent: bushy and some tens of levels deep) and a
--nodes-deep chain, then drives Debian's Chromium (tests/support.py's launch
arguments) and reports, as p50 / p95 over --repeat runs:

  * baseline: the reader page at the deepest node (navigation to load event);
  * the graph page's first render: navigation start to the first frame drawn
    with the whole layout (the page's own `weft-graph-drawn` mark);
  * one frame of the graph (draw time in the page) at scale 1 and with the
    whole tree fitted in view (every box drawn);
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


def browser_figures(
    page, base: str, tree, deep: int, target: int, repeat: int
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {
        k: [] for k in ("reader", "graph", "frame1", "framefit", "click", "clicknav")
    }
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
        # Frames: pan a little at scale 1, then fit the whole tree and zoom there.
        for fit, key in ((False, "frame1"), (True, "framefit")):
            if fit:
                page.get_by_role("button", name="Fit the whole tree").click()
            for i in range(10):
                page.evaluate(f"window.weftGraph.zoom({1.02 if i % 2 else 1 / 1.02})")
                page.wait_for_timeout(20)
                out[key].append(float(page.locator("#loom-graph").get_attribute("data-frame-ms")))
        page.get_by_role("button", name="Back to the current node").click()
        page.wait_for_timeout(50)
        canvas = page.locator("#loom-graph").bounding_box()
        at = page.evaluate(f"window.weftGraph.screenOf({target})")
        t0 = time.perf_counter()
        page.mouse.click(canvas["x"] + at["x"], canvas["y"] + at["y"])
        page.wait_for_selector(f'#loom-reader[data-node="{target}"]')
        page.wait_for_load_state("load")
        out["click"].append((time.perf_counter() - t0) * 1000)
        out["clicknav"].append(
            page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
        )
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
        runs = [
            (f"{args.nodes:,}-node tree", bushy, bushy_deep, tree_parent_of(bushy_deep)),
            (f"{args.nodes:,}-deep chain", chain, chain_deep, tree_parent_of(chain_deep)),
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
                print(f"{'':46} {'p50':>8} {'p95':>8} {'÷ reader':>9}")
                for key, what in (
                    ("reader", "baseline: reader page, navigation to load"),
                    ("graph", "graph page, navigation to first full frame"),
                    ("frame1", "graph frame at scale 1 (draw only)"),
                    ("framefit", "graph frame, whole tree in view (draw only)"),
                    ("click", "click a box → reader loaded (wall clock)"),
                    ("clicknav", "  the same, its navigation to load (in page)"),
                ):
                    ratio = percentile(got[key], 0.5) / base
                    print(f"{what:46} {p(got[key])} {ratio:9.2f}")
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
