"""/v1 through nginx (deploy/nginx/weft.conf, TLS) with two web processes vs one, and
what the nginx hop adds.

    .venv/bin/python bench/topology.py [--requests 1500] [--concurrent 64] [--rounds 3]
        [--pairs 300]

Starts its own Postgres and Redis, a scripted engine (no token delay: short answers,
max_tokens=1), two web processes, and two nginx on the deploy site file — one sending
to web process 1 only, one to both — so the two setups run side by side and see the
same load (2 shared cores):

  1. throughput: --requests short non-streaming requests, --concurrent at a time, through
     each nginx in turn (one, both, one, both, ...; a warm-up round first). Target: both
     >= 1.4 x one. CPU seconds per request of every process, read from /proc, say where
     the time goes when the target is missed (bench.cpu).
  2. the hop: --pairs sequential requests alternating web process 1 directly (HTTP) and
     through nginx (HTTPS, keep-alive); added = via nginx - direct, per pair.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_overhead import make_keys  # noqa: E402
from bench.cpu import cpu_seconds, pid_serving  # noqa: E402
from bench.stack import percentile, start_services, start_web  # noqa: E402
from engine.testing import run_engine  # noqa: E402
from launch.datadir import scratch_dir  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402
from tests.deploy.topology import render_site, start_nginx  # noqa: E402
from tests.support import free_port  # noqa: E402

BODY = {"model": "scripted", "prompt": "Once upon a time", "max_tokens": 1, "temperature": 0}


async def burst(url: str, tls, keys: list[str], total: int, concurrent: int) -> tuple[float, list]:
    """(requests per second, the statuses other than 200) of `total` requests,
    `concurrent` at a time."""
    import httpx

    limits = httpx.Limits(max_connections=concurrent, max_keepalive_connections=concurrent)
    errors: list = []
    left = total
    async with httpx.AsyncClient(verify=tls, limits=limits, timeout=60) as client:

        async def worker(index: int) -> None:
            nonlocal left, errors
            auth = {"Authorization": f"Bearer {keys[index % len(keys)]}"}
            while left > 0:
                left -= 1
                try:
                    answer = await client.post(f"{url}/v1/completions", json=BODY, headers=auth)
                except httpx.HTTPError as exc:
                    errors.append(type(exc).__name__)
                    continue
                if answer.status_code != 200:
                    errors.append(answer.status_code)

        # Warm the connections (TLS handshakes) before the clock starts.
        await asyncio.gather(*(client.get(f"{url}/health") for _ in range(concurrent)))
        started = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(concurrent)))
        return total / (time.perf_counter() - started), errors


def throughput(proxies: dict, keys: list[str], args, pids: dict) -> None:
    rates: dict[str, list[float]] = {"one": [], "both": []}
    cpu: dict[str, dict[str, float]] = {"one": {}, "both": {}}
    errors: dict[str, list] = {"one": [], "both": []}
    for url, tls in proxies.values():  # warm-up
        asyncio.run(burst(url, tls, keys, args.requests // 3, args.concurrent))
    for _ in range(args.rounds):
        for name, (url, tls) in proxies.items():
            before = cpu_seconds(pids)
            rate, failed = asyncio.run(burst(url, tls, keys, args.requests, args.concurrent))
            after = cpu_seconds(pids)
            rates[name].append(rate)
            errors[name] += failed
            for process in pids:
                spent = (after[process] - before[process]) / args.requests * 1000
                cpu[name][process] = cpu[name].get(process, 0) + spent / args.rounds
    ratios = [b / o for o, b in zip(rates["one"], rates["both"], strict=True)]
    print(f"{args.concurrent} concurrent short /v1 requests through nginx ({args.requests} a "
          f"round, {args.rounds} rounds each, alternating): one web process "
          f"{statistics.median(rates['one']):.0f} req/s, two "
          f"{statistics.median(rates['both']):.0f} req/s; ratio "
          f"{statistics.median(ratios):.2f} (target >= 1.4; each round "
          f"{', '.join(f'{r:.2f}' for r in ratios)}); errors {errors}")  # fmt: skip
    for name in ("one", "both"):
        print(f"  CPU ms per request, {name}: "
              + ", ".join(f"{p} {v:.2f}" for p, v in cpu[name].items())
              + f"; all {sum(cpu[name].values()):.2f}")  # fmt: skip
    # What 2 cores allow, from those CPU costs: every process shares the two cores, and
    # one web process cannot use more than one. A second web process can only help
    # when one web process's core is what runs out first.
    for client in (True, False):
        one, both = cpu["one"], cpu["both"]
        served = [p for p in one if client or p != "client"]
        one_all = sum(one[p] for p in served)
        both_all = sum(both[p] for p in served)
        one_cap = min(2000 / one_all, 1000 / one["web-1"])
        both_cap = min(2000 / both_all, 1000 / max(both["web-1"], both["web-2"]))
        where = "with this client on the machine" if client else "the client elsewhere"
        print(f"  2 cores' bound, {where}: one web process <= {one_cap:.0f} req/s "
              f"({'its own core' if one_cap < 2000 / one_all else 'the two cores'} the limit), "
              f"two <= {both_cap:.0f} req/s: ratio <= {both_cap / one_cap:.2f}")  # fmt: skip


def hop(direct: str, via: str, tls, key: str, pairs: int) -> None:
    import httpx

    auth = {"Authorization": f"Bearer {key}"}
    added, direct_ms = [], []
    with httpx.Client(timeout=30, headers=auth) as a, \
            httpx.Client(timeout=30, headers=auth, verify=tls) as b:  # fmt: skip
        for i in range(pairs + 20):
            t0 = time.perf_counter()
            assert a.post(f"{direct}/v1/completions", json=BODY).status_code == 200
            t1 = time.perf_counter()
            assert b.post(f"{via}/v1/completions", json=BODY).status_code == 200
            t2 = time.perf_counter()
            if i >= 20:
                direct_ms.append((t1 - t0) * 1000)
                added.append(((t2 - t1) - (t1 - t0)) * 1000)
    print(f"the nginx hop ({pairs} pairs, sequential, keep-alive; HTTPS via nginx vs HTTP "
          f"directly): direct p50 {statistics.median(direct_ms):.2f} ms; added p50 "
          f"{percentile(added, 0.5):.2f} ms, p95 {percentile(added, 0.95):.2f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--concurrent", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=300)
    args = parser.parse_args()
    sup = Supervisor()
    scratch = scratch_dir("weft-bench-topology-")
    with run_engine("scripted", log_level="warning") as engine:
        try:
            env = start_services(
                scratch, sup, WEFT_BACKEND_URL=f"{engine}/v1", WEFT_API_MAX_ACTIVE="64",
                WEFT_API_RATE_PER_MINUTE="10000000", ALLOWED_HOSTS="127.0.0.1",
            )  # fmt: skip
            ports = [free_port(), free_port()]
            webs = [start_web(sup, env, port) for port in ports]
            proxies = {}  # name: (its URL, the TLS context trusting its certificate)
            for name, upstream in (("one", ports[:1]), ("both", ports)):
                https = free_port()
                folder = scratch / f"nginx-{name}"
                site = render_site(upstream, free_port(), https, folder)
                proxies[name] = (f"https://127.0.0.1:{https}", start_nginx(sup, folder, site))
            keys = make_keys(env, 4)
            started = {name: proc.pid for name, proc, _ in sup.children}
            by_name = [(name, proc.pid) for name, proc, _ in sup.children]
            webs_pids = [pid for name, pid in by_name if name == "web"]
            nginx_pids = [pid for name, pid in by_name if name == "nginx"]
            # "+": with its children (nginx's workers, Postgres's backends; bench.cpu)
            pids = {"web-1": webs_pids[0], "web-2": webs_pids[1], "nginx-one+": nginx_pids[0],
                    "nginx-both+": nginx_pids[1], "engine": pid_serving(engine),
                    "postgres+": started["postgres"], "redis": started["redis"],
                    "client": os.getpid()}  # fmt: skip
            print(f"uptime: {os.popen('uptime').read().strip()}")
            throughput(proxies, keys, args, pids)
            hop(webs[0], *proxies["one"], keys[0], args.pairs)
            print(f"uptime: {os.popen('uptime').read().strip()}")
        finally:
            sup.stop_all()
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
