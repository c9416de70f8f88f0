"""Loom at size: opening a deep node and exporting a 100,000-node tree.

    .venv/bin/python bench/loom_tree.py [--nodes 100000] [--chain 10000] [--repeat 40]

Starts its own throw-away Postgres (and Redis), migrates, then builds
  * a 100,000-node tree: each node's parent is drawn from the 2,000 most
    recent nodes (so the tree is both bushy and a few hundred levels deep),
    ~200 characters per node, a third of the nodes model-written;
  * a 10,000-deep chain (every node the only child of the one before).
No ANALYZE is run: the queries must plan well on fresh rows.

Reported: server time to open a node (the node page through Django's test
client: path query, children, outline, template rendering, the whole
response) p50/p95 over --repeat requests, for the full page and for the htmx
fragment, at the deepest node of each tree. The reading view shows the last
1,000 segments of a path (loom.reading.PATH_WINDOW) and loads the earlier text
on request; that request (the whole 10,000-segment path) is timed too. Then the time and Python peak
memory (tracemalloc) to stream each export of the 100,000-node tree, with the
process's max RSS. Targets: p95 <= 50 ms to open, <= 5 s to export, memory
bounded (not proportional to the tree's text).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from launch.datadir import scratch_dir  # noqa: E402
from launch.embedded import ensure_database, start_postgres, start_redis  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402

WORDS = (
    "the a of loom thread weave river stone light night garden path fork branch and to in".split()
)


def text(rng: random.Random, chars: int) -> str:
    out, n = [], 0
    while n < chars:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " " + " ".join(out)


def allocate(n: int) -> list[int]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT nextval(pg_get_serial_sequence('loom_node', 'id')) FROM generate_series(1, %s)",
            [n],
        )
        return [r[0] for r in cur.fetchall()]


def build_bushy(user, n: int, rng: random.Random):
    from loom.models import Node, Tree

    tree = Tree.objects.create_from_prompt(user, "Bushy tree prompt.", title="bushy")
    ids = [tree.root.pk] + allocate(n - 1)
    depth = {ids[0]: 0}
    positions: dict[int, int] = {}
    batch = []
    for i in range(1, n):
        parent = ids[rng.randrange(max(0, i - 2000), i)]
        depth[ids[i]] = depth[parent] + 1
        pos = positions.get(parent, 0)
        positions[parent] = pos + 1
        batch.append(
            Node(
                id=ids[i],
                tree=tree,
                parent_id=parent,
                position=pos,
                text=text(rng, 200),
                author="model" if i % 3 == 0 else "human",
            )
        )
        if len(batch) == 5000:
            Node.objects.bulk_create(batch)
            batch = []
    Node.objects.bulk_create(batch)
    deepest = max(depth, key=depth.get)
    return tree, deepest, depth[deepest]


def build_chain(user, n: int, rng: random.Random):
    from loom.models import Node, Tree

    tree = Tree.objects.create_from_prompt(user, "Chain prompt.", title="chain")
    prev = tree.root.pk
    batch = []
    for node_id in allocate(n):
        batch.append(Node(id=node_id, tree=tree, parent_id=prev, position=0, text=text(rng, 40)))
        prev = node_id
        if len(batch) == 5000:
            Node.objects.bulk_create(batch)
            batch = []
    Node.objects.bulk_create(batch)
    return tree, prev, n


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def time_open(client, url: str, repeat: int, htmx: bool) -> tuple[float, float, int]:
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    client.get(url, **headers)  # warm
    samples = []
    size = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        response = client.get(url, **headers)
        samples.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.status_code
        size = len(response.content)
    return statistics.median(samples), pct(samples, 0.95), size


def time_export(client, url: str) -> tuple[float, float, int]:
    """Seconds to stream the export, then Python's peak allocation during a
    second run under tracemalloc (which slows allocation, so it is not timed)."""
    t0 = time.perf_counter()
    total = sum(len(chunk) for chunk in client.get(url).streaming_content)
    elapsed = time.perf_counter() - t0
    tracemalloc.start()
    for _chunk in client.get(url).streaming_content:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak / 1e6, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--chain", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=40)
    args = ap.parse_args()

    sup = Supervisor()
    scratch = scratch_dir("weft-bench-")  # as root, the services' user writes here
    try:
        start_postgres(sup, scratch / "pg", durable=False)
        ensure_database(scratch / "pg", "weft")
        os.environ["DATABASE_URL"] = f"postgresql://postgres@/weft?host={scratch / 'pg'}"
        os.environ["REDIS_URL"] = start_redis(sup, scratch / "redis.sock", persist=False)
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
        os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1")
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_user("bench", password="x" * 12)
        rng = random.Random(7)

        t0 = time.perf_counter()
        bushy, bushy_deep, bushy_depth = build_bushy(user, args.nodes, rng)
        chain, chain_deep, chain_depth = build_chain(user, args.chain, rng)
        print(
            f"built {args.nodes:,}-node tree (deepest node at depth {bushy_depth}) and a "
            f"{args.chain:,}-deep chain in {time.perf_counter() - t0:.1f} s"
        )

        client = Client()
        client.force_login(user)
        print(f"\nopen a node ({args.repeat} requests each; ms)")
        print(f"{'':38} {'p50':>8} {'p95':>8} {'bytes':>10}")
        for label, tree, node in (
            (f"{args.nodes:,}-node tree, depth {bushy_depth}", bushy, bushy_deep),
            (f"chain, depth {chain_depth}", chain, chain_deep),
            (f"chain, depth {chain_depth // 2}", chain, None),
        ):
            if node is None:
                from loom.models import Node

                node = Node.objects.path_to(chain_deep)[chain_depth // 2].id
            url = f"/loom/{tree.pk}/n/{node}/"
            for kind, htmx in (("page", False), ("fragment", True)):
                p50, p95, size = time_open(client, url, args.repeat, htmx)
                print(f"{label + ' ' + kind:38} {p50:8.1f} {p95:8.1f} {size:10,}")

        url = f"/loom/{chain.pk}/n/{chain_deep}/path/"
        p50, p95, size = time_open(client, url, max(5, args.repeat // 4), True)
        print(
            f"{'chain, depth ' + str(chain_depth) + ' whole path':38} {p50:8.1f} {p95:8.1f} {size:10,}"
        )

        print(f"\nexport the {args.nodes:,}-node tree (streamed through the test client)")
        print(f"{'':12} {'seconds':>8} {'MB out':>8} {'py peak MB':>11}")
        for fmt in ("weft", "pyloom", "jsonl"):
            secs, peak, total = time_export(client, f"/loom/{bushy.pk}/export/{fmt}/")
            print(f"{fmt:12} {secs:8.2f} {total / 1e6:8.1f} {peak:11.1f}")
        secs, peak, total = time_export(client, f"/loom/{chain.pk}/export/pyloom/")
        print(f"{'chain pyloom':12} {secs:8.2f} {total / 1e6:8.1f} {peak:11.1f}")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"\nmax RSS of this process (building included): {rss:.0f} MB")
    finally:
        from django.db import connections

        connections.close_all()
        sup.stop_all()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
