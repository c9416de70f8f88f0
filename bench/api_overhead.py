"""What Weft's /v1 proxy adds, measured against the same backend called directly.

    .venv/bin/python bench/api_overhead.py [--requests 300] [--stream-tokens 300]
        [--token-delay 0.002] [--stream-runs 3] [--concurrent 64] [--concurrent-tokens 24]

Starts its own throw-away Postgres and Redis, the ASGI server (uvicorn, as `make run`)
and scripted engines, and creates API keys with ample budgets. Every figure is a pair
measured in the same run, so both halves see the same machine load (2 shared cores):

  1. non-streaming, max_tokens=1: requests alternate direct / via Weft on the same
     engine (one keep-alive client each); added latency = via - direct, per pair.
     Targets: added p50 <= 3 ms, p95 <= 10 ms.
  2. streaming from an engine at a fixed token rate (--token-delay s/token): a direct
     stream and a Weft stream, one after the other on the same engine, alternating.
     Throughput = (N-1) / (t_last - t_first); added per token = the time between
     tokens i-1 and i via Weft minus the same directly; also reported: added time to
     the first token, and via_i - direct_i (each from its own t0, so it includes the
     first token's setup: auth, limits, validation, reservation). Targets: ratio
     >= 0.98, added per token p50 <= 1 ms.
  3. --concurrent streams at once, direct, then via Weft (spread over four keys: one key
     may run 16 at a time), twice, on the same engine. Aggregate tokens/s ratio >= 0.95, 0 errors.
     (The engine batches every active sequence, so the direct side is fast and this
     measures the proxy's own cost per request and per relayed token.) The seed's
     limits are left as they are: 4 keys x 16 active, so no stream waits in Weft's
     queue; the engine runs 16 sequences at once, so on both sides 48 wait in the
     engine's own queue and the batch runs in 4 waves. Also printed: when the 1st and
     16th streams got their first token — Weft's added time to the 16th (its first wave)
     is, nearly all of it, the ratio's shortfall.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cpu import cpu_seconds, pid_serving  # noqa: E402
from bench.stack import percentile, start_services, start_web  # noqa: E402
from engine.testing import run_engine  # noqa: E402
from launch.datadir import scratch_dir  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402

PROMPT = "Once upon a time, in a quiet village by the sea,"


def make_keys(env: dict, count: int) -> list[str]:
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "WEFT_DATA_DIR",
                                           "SECRET_KEY", "DJANGO_SETTINGS_MODULE")})  # fmt: skip
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from api.models import ApiKey

    user = get_user_model().objects.create_user("bench", password="bench-password-123")
    return [ApiKey.objects.create_key(user, f"bench{i}", budget=10**12)[1] for i in range(count)]


# --- 1. non-streaming -----------------------------------------------------------------


def nonstreaming(direct: str, weft: str, key: str, rounds: int) -> dict:
    import httpx

    body = {"prompt": PROMPT, "max_tokens": 1, "temperature": 0}
    added: list[float] = []
    direct_ms: list[float] = []
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(timeout=30) as a, httpx.Client(timeout=30, headers=auth) as b:
        for i in range(rounds + 20):
            t0 = time.perf_counter()
            r1 = a.post(f"{direct}/completions", json={**body, "model": "scripted"})
            t1 = time.perf_counter()
            r2 = b.post(f"{weft}/completions", json={**body, "model": "fast"})
            t2 = time.perf_counter()
            assert r1.status_code == 200 and r2.status_code == 200, (r1.text, r2.text)
            if i >= 20:  # warm-up: connections, caches
                direct_ms.append((t1 - t0) * 1000)
                added.append((t2 - t1 - (t1 - t0)) * 1000)
    return {
        "direct_p50_ms": statistics.median(direct_ms),
        "added_p50_ms": percentile(added, 0.5),
        "added_p95_ms": percentile(added, 0.95),
    }


# --- 2. and 3. streaming ----------------------------------------------------------------


async def stream_once(client, url: str, body: dict, headers: dict, t0: float) -> list[float]:
    arrivals: list[float] = []
    async with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"status {response.status_code}: {(await response.aread())[:200]}")
        buffer = b""
        async for chunk in response.aiter_raw():
            buffer += chunk
            while (end := buffer.find(b"\n\n")) >= 0:
                frame, buffer = buffer[:end], buffer[end + 2 :]
                if frame == b"data: [DONE]":
                    return arrivals
                if b'"error"' in frame[:12]:
                    raise RuntimeError("error frame")
                arrivals.append(time.perf_counter() - t0)
    raise RuntimeError("stream ended without [DONE]")


def rate(arrivals: list[float]) -> float:
    return (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])


async def streaming_pairs(direct: str, weft: str, key: str, tokens: int, runs: int) -> dict:
    """Direct and via-Weft streams one after the other on the same engine, alternating:
    two streams at once would compete for the 2 cores and measure that instead."""
    import httpx

    body = {"prompt": PROMPT, "max_tokens": tokens, "temperature": 0, "stream": True}
    ratios, added, first, gaps = [], [], [], []
    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=120) as client:
        for run in range(runs + 1):

            async def direct_run():
                return await stream_once(client, f"{direct}/completions",
                                         {**body, "model": "scripted"}, {}, time.perf_counter())  # fmt: skip

            async def weft_run():
                return await stream_once(client, f"{weft}/completions",
                                         {**body, "model": "paced"}, auth, time.perf_counter())  # fmt: skip

            # Alternate which goes first, so a drift in the machine's load cancels out.
            if run % 2:
                d, w = await direct_run(), await weft_run()
            else:
                w, d = await weft_run(), await direct_run()
            if run == 0:
                continue  # warm-up
            assert len(d) == len(w), (len(d), len(w))
            ratios.append(rate(w) / rate(d))
            added += [(b - a) * 1000 for a, b in zip(d, w, strict=True)]
            first.append((w[0] - d[0]) * 1000)
            gaps += [((w[i] - w[i - 1]) - (d[i] - d[i - 1])) * 1000 for i in range(1, len(d))]
    return {
        "throughput_ratio": statistics.median(ratios),
        "added_per_token_p50_ms": percentile(added, 0.5),
        "added_per_token_p95_ms": percentile(added, 0.95),
        "added_first_token_ms": statistics.median(first),
        "added_gap_p50_ms": percentile(gaps, 0.5),
    }


async def concurrent(
    direct: str, weft: str, keys: list[str], count: int, tokens: int, rounds: int, pids: dict
) -> dict:
    import httpx

    from completions.pool import FlatTransport

    body = {"prompt": PROMPT, "max_tokens": tokens, "temperature": 0, "stream": True}
    limits = httpx.Limits(max_connections=count * 2, max_keepalive_connections=count * 2)

    async def many(url: str, model: str, with_keys: bool) -> tuple[float, int, int, dict, list]:
        # The door's pool on this side too: httpcore's own re-scans every connection on
        # each request and would make the client, not the proxy, what is measured.
        transport = FlatTransport(limits)
        # This client's own garbage collections (a full one takes tens of ms here) would
        # land on one side of a pair at random: collect before, not during, each batch.
        gc.collect()
        gc.disable()
        async with httpx.AsyncClient(timeout=600, transport=transport) as client:
            cpu0 = cpu_seconds(pids)
            t0 = time.perf_counter()
            jobs = [
                stream_once(client, url, {**body, "model": model},
                            {"Authorization": f"Bearer {keys[i % len(keys)]}"} if with_keys else {},
                            t0)
                for i in range(count)
            ]  # fmt: skip
            results = await asyncio.gather(*jobs, return_exceptions=True)
            elapsed = time.perf_counter() - t0
            cpu1 = cpu_seconds(pids)
        gc.enable()
        errors = [r for r in results if isinstance(r, BaseException)]
        done = [r for r in results if not isinstance(r, BaseException)]
        got = sum(len(r) for r in done)
        cpu = {name: cpu1[name] - cpu0[name] for name in pids}
        return got / elapsed, got, len(errors), cpu, sorted(r[0] for r in done if r)

    # One batch after the other on the same engine, alternating which goes first; the
    # first pair warms connections and caches on both sides and is not counted.
    runs = []
    for run in range(rounds + 1):
        if run % 2:
            d = await many(f"{direct}/completions", "scripted", False)
            w = await many(f"{weft}/completions", "paced", True)
        else:
            w = await many(f"{weft}/completions", "paced", True)
            d = await many(f"{direct}/completions", "scripted", False)
        if run:
            runs.append((d, w))
    ratios = [w[0] / d[0] for d, w in runs]
    tokens_w = sum(w[1] for _, w in runs)

    def nth_first(side: int, n: int) -> float:
        # When the n-th stream got its first token (ms from the start), median over pairs.
        return (
            statistics.median(pair[side][4][min(n, len(pair[side][4])) - 1] for pair in runs) * 1000
        )

    return {
        # The engine runs 16 sequences at once: the 16th first token is when its first
        # wave is complete, and every later wave starts from there; the 64th, when the
        # last wave has started (its lag is what the ratio loses).
        "first_token_ms": {n: (nth_first(0, n), nth_first(1, n)) for n in (1, 16, 64)},
        "direct_tok_s": statistics.median(d[0] for d, _ in runs),
        "weft_tok_s": statistics.median(w[0] for _, w in runs),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "tokens": (sum(d[1] for d, _ in runs), tokens_w),
        "errors": (sum(d[2] for d, _ in runs), sum(w[2] for _, w in runs)),
        # CPU seconds of each process per relayed token, and the web process' per request.
        "cpu_us_per_token": {
            side: {name: sum(r[i][3][name] for r in runs) * 1e6 / tokens_w for name in pids}
            for i, side in ((0, "direct"), (1, "weft"))
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--stream-tokens", type=int, default=300)
    parser.add_argument("--token-delay", type=float, default=0.005)
    parser.add_argument("--stream-runs", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=64)
    parser.add_argument("--concurrent-tokens", type=int, default=24)
    parser.add_argument("--concurrent-rounds", type=int, default=3)
    parser.add_argument("--only", choices=["1", "2", "3"], help="run one part alone")
    args = parser.parse_args()
    parts = {args.only} if args.only else {"1", "2", "3"}
    sup = Supervisor()
    scratch = scratch_dir("weft-bench-api-")  # as root, the services' user writes here
    with (
        run_engine("scripted", log_level="warning") as fast,
        run_engine("scripted", token_delay=args.token_delay, log_level="warning") as paced,
    ):
        try:
            backends = [
                {"name": "fast", "url": f"{fast}/v1", "models": {"fast": "scripted"}},
                {"name": "paced", "url": f"{paced}/v1", "models": {"paced": "scripted"}},
            ]
            env = start_services(
                scratch,
                sup,
                WEFT_BACKENDS=json.dumps(backends),
                WEFT_DEFAULT_MODEL="fast",
                WEFT_API_RATE_PER_MINUTE="100000",
            )
            weft = start_web(sup, env, 19000 + os.getpid() % 1000) + "/v1"
            keys = make_keys(env, 4)
            print(f"uptime: {os.popen('uptime').read().strip()}")
            if "1" in parts:
                part_one(fast, weft, keys, args)
            if "2" in parts:
                part_two(paced, weft, keys, args)
            if "3" in parts:
                started = {name: proc.pid for name, proc, _ in sup.children}
                # postgres+: the postmaster and its backends (bench.cpu).
                pids = {"web": started["web"], "engine": pid_serving(paced),
                        "client": os.getpid(), "postgres+": started["postgres"],
                        "redis": started["redis"]}  # fmt: skip
                part_three(paced, weft, keys, args, pids)
            print(f"uptime: {os.popen('uptime').read().strip()}")
        finally:
            sup.stop_all()
            shutil.rmtree(scratch, ignore_errors=True)


def part_one(fast: str, weft: str, keys: list[str], args: argparse.Namespace) -> None:
    one = nonstreaming(f"{fast}/v1", weft, keys[0], args.requests)
    print(f"non-streaming max_tokens=1 ({args.requests} pairs): direct p50 "
                  f"{one['direct_p50_ms']:.2f} ms; added p50 {one['added_p50_ms']:.2f} ms "
                  f"(target <= 3), p95 {one['added_p95_ms']:.2f} ms (target <= 10)")  # fmt: skip


def part_two(paced: str, weft: str, keys: list[str], args: argparse.Namespace) -> None:
    two = asyncio.run(streaming_pairs(f"{paced}/v1", weft, keys[1],
                                              args.stream_tokens, args.stream_runs))  # fmt: skip
    print(f"streaming {args.stream_tokens} tokens at {1 / args.token_delay:.0f} tok/s: "
                  f"throughput ratio {two['throughput_ratio']:.3f} (target >= 0.98); added time "
                  f"between tokens p50 {two['added_gap_p50_ms']:.3f} ms (target <= 1); added "
                  f"to the first token {two['added_first_token_ms']:.2f} ms; arrival of token i "
                  f"later than direct p50 {two['added_per_token_p50_ms']:.2f} ms, p95 "
                  f"{two['added_per_token_p95_ms']:.2f} ms")  # fmt: skip


def part_three(
    paced: str, weft: str, keys: list[str], args: argparse.Namespace, pids: dict
) -> None:
    three = asyncio.run(concurrent(f"{paced}/v1", weft, keys, args.concurrent,
                                           args.concurrent_tokens, args.concurrent_rounds, pids))  # fmt: skip
    print(f"{args.concurrent} concurrent streams x {args.concurrent_tokens} tokens "
                  f"({args.concurrent_rounds} pairs after a warm-up pair): direct "
                  f"{three['direct_tok_s']:.0f} tok/s, via Weft {three['weft_tok_s']:.0f} tok/s, "
                  f"ratio {three['ratio']:.3f} (target >= 0.95; each pair "
                  f"{', '.join(f'{r:.3f}' for r in three['ratios'])}); tokens {three['tokens']}, "
                  f"errors direct/weft {three['errors']} (target 0)")  # fmt: skip
    print(
        "  first token of the n-th stream (ms after the start, direct / via Weft): "
        + "; ".join(f"n={n}: {d:.1f} / {w:.1f}" for n, (d, w) in three["first_token_ms"].items())
    )
    cpu = three["cpu_us_per_token"]
    print("  CPU per relayed token (µs, load-insensitive): "
                  + "; ".join(f"{side}: " + ", ".join(f"{n} {v:.0f}" for n, v in cpu[side].items())
                              for side in cpu)
                  + f"; the web process: {cpu['weft']['web'] * args.concurrent_tokens / 1000:.2f} "
                  "ms per request, relay included")  # fmt: skip


if __name__ == "__main__":
    main()
