"""Tokens through the whole pipeline vs. the same tokens read straight from the engine.

    .venv/bin/python bench/pipeline_throughput.py [--runs 3] [--scripted-tokens 300]
        [--scripted-delay 0.005] [--llama-tokens 64] [--no-llama]

Starts its own throw-away Postgres and Redis, the ASGI server, a Celery worker and, per
backend (the scripted one at a fixed token rate, then the real model), two identical
engines. Each measured run is a pair started at the same instant, so both halves see
the same machine load (this box has 2 shared cores):

  direct    httpx + SSE straight to engine B; t0 = just before the request is sent
  pipeline  a Generation row (validated, budget reserved) whose Celery task is enqueued
            at t0 with the WebSocket already connected; the worker streams from engine
            A, checkpoints, publishes to the Channels group, and the consumer sends
            htmx fragments to this WebSocket client

Both use identical parameters (temperature 0), so they carry the same tokens.
Reported per backend: steady-state throughput ((N-1) / (t_last - t_first)) and its
ratio pipeline/direct; added latency per token (pipeline arrival_i - direct arrival_i,
both from their t0) p50/p95; added time to the first token. Targets: ratio >= 0.95,
<= 5 ms p50 / 20 ms p95 per token, <= 50 ms to the first token.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stack import percentile, start_services, start_web  # noqa: E402
from config import lanes  # noqa: E402
from engine.testing import run_engine  # noqa: E402
from launch.datadir import scratch_dir  # noqa: E402
from launch.services import worker_command  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402

QUEUE = "bench"
QUEUES = ",".join(lanes.queue_name(pool, QUEUE) for pool in lanes.POOLS)
PICKUP_MS: list[float] = []  # enqueue -> the worker has claimed the row
PROMPT = "Once upon a time, in a quiet village by the sea,"


def start_worker(sup: Supervisor, env: dict[str, str], log: Path) -> subprocess.Popen:
    handle = open(log, "wb")  # noqa: SIM115 - lives as long as the worker
    proc = sup.start(
        "worker",
        worker_command(sys.executable, 2, QUEUES, name=f"bench-{time.monotonic_ns()}@%h"),
        env_vars=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    # Celery logs "ready" at INFO only; wait for the worker to consume instead.
    time.sleep(4)
    if proc.poll() is not None:
        raise SystemExit(f"worker exited: {log.read_text()[-2000:]}")
    return proc


def direct_run(api: str, body: dict) -> list[float]:
    import httpx
    from httpx_sse import connect_sse

    arrivals: list[float] = []
    with httpx.Client(timeout=120) as client:
        t0 = time.perf_counter()
        with connect_sse(client, "POST", f"{api}/completions", json=body) as source:
            for sse in source.iter_sse():
                if sse.data == "[DONE]":
                    break
                chunk = json.loads(sse.data)
                for choice in chunk.get("choices") or []:
                    if choice.get("text"):
                        arrivals.append(time.perf_counter() - t0)
    return arrivals


async def paired_run(
    web: str, cookie: str, user, body: dict, direct_api: str
) -> tuple[list[float], list[float]]:
    """One pipeline run and, started at the same instant against a twin engine, one
    direct run: both see the same machine load, so their difference is the pipeline."""
    import websockets
    from asgiref.sync import sync_to_async

    from completions import pipeline  # after django.setup() in main()
    from completions.tasks import run_generation

    generation = await sync_to_async(pipeline.start)(user, body, kind="workbench")
    url = web.replace("http://", "ws://") + f"/ws/generations/{generation.pk}/"
    headers = {"Cookie": f"sessionid={cookie}", "Origin": web}
    marker = f"beforeend:#gen-{generation.pk}-choice-"
    arrivals: list[float] = []
    direct: list[list[float]] = []
    stream_body = {**body, "stream": True}
    reader = threading.Thread(target=lambda: direct.append(direct_run(direct_api, stream_body)))
    async with websockets.connect(url, additional_headers=headers) as ws:
        await asyncio.wait_for(ws.recv(), 10)  # the initial state fragment: we are subscribed
        t0 = time.perf_counter()
        wall0 = time.time()
        reader.start()
        run_generation.apply_async(
            (generation.pk,), queue=lanes.queue_name(lanes.INTERACTIVE_POOL, QUEUE)
        )
        while True:
            message = await asyncio.wait_for(ws.recv(), 60)
            now = time.perf_counter() - t0
            arrivals.extend([now] * message.count(marker))
            if f"gen-{generation.pk}-final" in message:
                break
    await asyncio.to_thread(reader.join, 120)
    await sync_to_async(generation.refresh_from_db)()
    PICKUP_MS.append((generation.started_at.timestamp() - wall0) * 1000)
    return direct[0], arrivals


def measure(
    name: str, api: str, twin_api: str, web: str, cookie: str, user, tokens: int, runs: int
) -> dict:
    """`api` feeds the worker; `twin_api` (an identical engine) feeds the direct reader."""
    import httpx
    from django.conf import settings

    settings.WEFT_BACKEND_URL = api
    model = httpx.get(f"{api}/models").json()["data"][0]["id"]
    body = {"model": model, "prompt": PROMPT, "max_tokens": tokens, "temperature": 0}
    direct_runs, pipe_runs = [], []
    asyncio.run(paired_run(web, cookie, user, body, twin_api))  # warm-up
    PICKUP_MS.clear()
    for _ in range(runs):
        d, p = asyncio.run(paired_run(web, cookie, user, body, twin_api))
        if len(p) != len(d):
            raise SystemExit(f"{name}: pipeline delivered {len(p)} tokens, direct {len(d)}")
        direct_runs.append(d)
        pipe_runs.append(p)

    def rate(arrivals: list[float]) -> float:
        return (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])

    added, first, drift = [], [], []
    for d, p in zip(direct_runs, pipe_runs, strict=True):
        n = min(len(d), len(p))
        added += [(p[i] - d[i]) * 1000 for i in range(n)]
        first.append((p[0] - d[0]) * 1000)
        drift += [((p[i] - p[0]) - (d[i] - d[0])) * 1000 for i in range(n)]
    direct_rate = statistics.mean(rate(d) for d in direct_runs)
    pipe_rate = statistics.mean(rate(p) for p in pipe_runs)
    return {
        "backend": name,
        "tokens_per_run": tokens,
        "runs": runs,
        "direct_tok_s": round(direct_rate, 1),
        "pipeline_tok_s": round(pipe_rate, 1),
        "throughput_ratio": round(pipe_rate / direct_rate, 3),
        "added_ms_p50": round(percentile(added, 0.5), 2),
        "added_ms_p95": round(percentile(added, 0.95), 2),
        "added_first_token_ms_median": round(statistics.median(first), 2),
        "added_first_token_ms_max": round(max(first), 2),
        "enqueue_to_claimed_ms_median": round(statistics.median(PICKUP_MS), 2),
        # The constant start offset vs. the per-token transit: how much later token i is
        # than token 0 in the pipeline, compared with the direct stream.
        "drift_ms_p50": round(percentile(drift, 0.5), 2),
        "drift_ms_p95": round(percentile(drift, 0.95), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scripted-tokens", type=int, default=300)
    parser.add_argument("--scripted-delay", type=float, default=0.005, help="seconds per token")
    parser.add_argument("--llama-tokens", type=int, default=64)
    parser.add_argument("--no-llama", action="store_true")
    args = parser.parse_args()

    scratch = scratch_dir("weft-bench-")  # as root, the services' user writes here
    sup = Supervisor()
    results = []
    try:
        env = start_services(
            scratch,
            sup,
            WEFT_MONTHLY_TOKEN_BUDGET=str(10**12),
            # Keep database connections across tasks, as a production worker would.
            DATABASE_CONN_MAX_AGE="60",
        )
        os.environ.update(env)
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.test import Client

        user = get_user_model().objects.create_user("bench", password="bench-password-long")
        client = Client()
        client.force_login(user)
        cookie = client.cookies["sessionid"].value
        web = start_web(sup, env, 18000 + os.getpid() % 1000)

        backends = [("scripted", {"token_delay": args.scripted_delay}, args.scripted_tokens)]
        if not args.no_llama:
            backends.append(("llama", {}, args.llama_tokens))
        for name, opts, tokens in backends:
            with run_engine(backend=name, **opts) as base, run_engine(backend=name, **opts) as twin:
                worker_env = {**env, "WEFT_BACKEND_URL": f"{base}/v1"}
                worker = start_worker(sup, worker_env, scratch / f"worker-{name}.log")
                try:
                    results.append(
                        measure(
                            name, f"{base}/v1", f"{twin}/v1", web, cookie, user, tokens, args.runs
                        )
                    )
                finally:
                    worker.terminate()
                    worker.wait(10)
    finally:
        sup.stop_all()
    print(json.dumps(results, indent=2))
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for r in results:
        # Per-token targets are read against the drift (each token's lateness beyond
        # the first token's): the fixed start offset -- Celery pickup, the worker's
        # connect -- is the first-token figure, which has its own 50 ms target.
        ok = (
            r["throughput_ratio"] >= 0.95
            and r["drift_ms_p50"] <= 5
            and r["drift_ms_p95"] <= 20
            and r["added_first_token_ms_median"] <= 50
        )
        print(
            f"{r['backend']:>8}: ratio {r['throughput_ratio']:.3f} ({r['pipeline_tok_s']} vs "
            f"{r['direct_tok_s']} tok/s), added per token after the first p50 "
            f"{r['drift_ms_p50']} ms / p95 {r['drift_ms_p95']} ms, first token "
            f"+{r['added_first_token_ms_median']} ms (max +{r['added_first_token_ms_max']}); "
            f"raw lateness incl. the start offset p50 {r['added_ms_p50']} ms / p95 "
            f"{r['added_ms_p95']} ms  {'MEETS' if ok else 'MISSES'} targets"
        )


if __name__ == "__main__":
    main()
