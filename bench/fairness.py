"""A quiet user's latency while another user floods the service, and the flooder's own
throughput.

    .venv/bin/python bench/fairness.py [--flood 200] [--flood-tokens 64] [--samples 12]
        [--quiet-tokens 16] [--token-delay 0.01]

Starts its own Postgres, Redis, the ASGI server, the two worker pools `make run` starts
(interactive and bulk, each its own Celery worker at the default thread counts) and
two identical scripted engines (each sequence's tokens spaced --token-delay apart).

  idle     the quiet user, alone: --samples API jobs (submit, long-poll the harvest
           until it succeeds) and --samples Workbench-kind page runs (queued → done),
           one after another
  flood    the flooder submits --flood jobs of --flood-tokens tokens at once; while
           they are queued or running, the quiet user does the same samples again
  direct   the baseline for the flooder's throughput: the same --flood requests
           straight to engine B from httpx, as many at once as today's single FIFO
           pool had threads (8) — what arrival order through today's workers could
           at best deliver

Prints p50/p95 of the quiet user's job and page-run latency idle and during the flood
(target: p95 during ≤ 1.5 × idle + 1 s), and the flooder's jobs/s against direct
(target ≥ 0.9).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stack import percentile, start_services, start_web  # noqa: E402
from config import lanes  # noqa: E402
from engine.testing import run_engine  # noqa: E402
from launch.checks import check_environment  # noqa: E402
from launch.datadir import scratch_dir  # noqa: E402
from launch.services import worker_command  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402

PREFIX = "bench-fair"
FIFO_THREADS = 8  # today's single worker pool


def start_pool(sup: Supervisor, env: dict, pool: lanes.WorkerPool, log: Path) -> None:
    handle = open(log, "wb")  # noqa: SIM115 - lives as long as the worker
    proc = sup.start(
        f"worker-{pool.name}",
        worker_command(sys.executable, pool.concurrency, ",".join(pool.queues), name=f"{pool.name}-{os.getpid()}@%h"),
        env_vars=env, stdout=handle, stderr=handle,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while b" ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


async def job_latency(client, body: dict) -> float:
    started = time.perf_counter()
    made = await client.post("/completions", json=body, headers={"Prefer": "respond-async"})
    made.raise_for_status()
    while True:
        got = (await client.get(f"/harvest/{made.json()['id']}", params={"wait": "30"})).json()
        if got["status"] == "succeeded":
            return time.perf_counter() - started
        if got["status"] not in ("queued", "running"):
            raise SystemExit(f"a quiet job ended {got['status']}: {got.get('error')}")


def page_latency(user, body: dict) -> float:
    from completions import pipeline
    from completions.models import Generation

    run = pipeline.start(user, body, kind="workbench")
    run = pipeline.wait_for_state(run, set(Generation.TERMINAL), 120)
    if run.state != "done":
        raise SystemExit(f"a quiet page run ended {run.state}: {run.error_code}")
    return (run.finished_at - run.created_at).total_seconds()


async def samples(client, user, body: dict, count: int) -> tuple[list[float], list[float]]:
    jobs, pages = [], []
    for _ in range(count):
        jobs.append(await job_latency(client, body))
        pages.append(await asyncio.to_thread(page_latency, user, body))
    return jobs, pages


async def flood(client, body: dict, count: int) -> tuple[list[str], float]:
    started = time.perf_counter()
    made = await asyncio.gather(
        *(client.post("/completions", json={**body, "prompt": f"Flood {i}"},
                      headers={"Prefer": "respond-async"}) for i in range(count))
    )  # fmt: skip
    for answer in made:
        answer.raise_for_status()
    return [a.json()["id"] for a in made], started


async def direct(api: str, body: dict, count: int) -> float:
    import httpx

    gate = asyncio.Semaphore(FIFO_THREADS)

    async def one(client, i: int) -> None:
        async with gate:
            (await client.post(f"{api}/completions", json={**body, "prompt": f"Flood {i}"})
             ).raise_for_status()  # fmt: skip

    async with httpx.AsyncClient(timeout=300) as client:
        started = time.perf_counter()
        await asyncio.gather(*(one(client, i) for i in range(count)))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flood", type=int, default=200)
    parser.add_argument("--flood-tokens", type=int, default=64)
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--quiet-tokens", type=int, default=16)
    parser.add_argument("--token-delay", type=float, default=0.01)
    args = parser.parse_args()

    scratch = scratch_dir("weft-bench-fair-")
    sup = Supervisor()
    try:
        env = start_services(
            scratch, sup, WEFT_GENERATION_QUEUE=PREFIX, DATABASE_CONN_MAX_AGE="60",
            WEFT_API_MAX_ACTIVE="64", WEFT_API_MAX_WAITING="512",
            WEFT_API_RATE_PER_MINUTE="100000", WEFT_MONTHLY_TOKEN_BUDGET=str(10**12),
            WEFT_API_USER_MONTHLY_BUDGET=str(10**12),
        )  # fmt: skip
        opts = {"token_delay": args.token_delay}
        with run_engine("scripted", **opts) as engine_a, run_engine("scripted", **opts) as engine_b:
            env["WEFT_BACKEND_URL"] = f"{engine_a}/v1"
            os.environ.update(env)
            import django

            django.setup()
            import httpx
            from django.contrib.auth import get_user_model

            from api.models import ApiKey
            from completions.models import Generation

            User = get_user_model()
            quiet_user = User.objects.create_user("quiet")
            flooder = User.objects.create_user("flooder")
            _, quiet_secret = ApiKey.objects.create_key(quiet_user, "quiet")
            _, flood_secret = ApiKey.objects.create_key(flooder, "flood")
            web = start_web(sup, env, 18700 + os.getpid() % 1000)
            interactive = check_environment()["worker_concurrency"]
            bulk = check_environment()["bulk_concurrency"]
            for pool in lanes.worker_pools(PREFIX, interactive, bulk):
                start_pool(sup, env, pool, scratch / f"{pool.name}.log")

            quiet_body = {"model": "scripted", "prompt": "Quiet", "max_tokens": args.quiet_tokens}
            flood_body = {"model": "scripted", "max_tokens": args.flood_tokens}

            async def run():
                auth = lambda s: {"Authorization": f"Bearer {s}"}  # noqa: E731
                limits = httpx.Limits(max_connections=256)
                async with (
                    httpx.AsyncClient(base_url=f"{web}/v1", headers=auth(quiet_secret),
                                      timeout=120) as quiet,
                    httpx.AsyncClient(base_url=f"{web}/v1", headers=auth(flood_secret),
                                      timeout=120, limits=limits) as loud,
                ):  # fmt: skip
                    await samples(quiet, quiet_user, quiet_body, 2)  # warm every path
                    idle = await samples(quiet, quiet_user, quiet_body, args.samples)
                    ids, started = await flood(loud, flood_body, args.flood)
                    during = await samples(quiet, quiet_user, quiet_body, args.samples)
                    queued_after = await asyncio.to_thread(
                        lambda: Generation.objects.filter(public_id__in=ids, state="queued").count()
                    )
                    while await asyncio.to_thread(
                        lambda: Generation.objects.filter(public_id__in=ids, state="done").count()
                    ) < len(ids):
                        await asyncio.sleep(0.1)
                    flood_s = await asyncio.to_thread(
                        lambda: max(
                            Generation.objects.filter(public_id__in=ids).values_list(
                                "finished_at", flat=True
                            )
                        )
                    )
                    first = await asyncio.to_thread(
                        lambda: min(
                            Generation.objects.filter(public_id__in=ids).values_list(
                                "created_at", flat=True
                            )
                        )
                    )
                    return idle, during, queued_after, (flood_s - first).total_seconds(), started

            idle, during, queued_after, flood_seconds, _ = asyncio.run(run())
            direct_seconds = asyncio.run(direct(f"{engine_b}/v1", flood_body, args.flood))
    finally:
        sup.stop_all()

    def stats(values: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(values, 0.5), 3), "p95": round(percentile(values, 0.95), 3)}

    result = {
        "flood_jobs": args.flood, "flood_tokens": args.flood_tokens, "quiet_tokens": args.quiet_tokens,
        "token_delay": args.token_delay, "pools": {"interactive": interactive, "bulk": bulk},
        "quiet_job_seconds": {"idle": stats(idle[0]), "flood": stats(during[0])},
        "quiet_page_run_seconds": {"idle": stats(idle[1]), "flood": stats(during[1])},
        "flood_jobs_still_queued_after_the_quiet_samples": queued_after,
        "flood_jobs_per_s": round(args.flood / flood_seconds, 2),
        "direct_jobs_per_s_at_8": round(args.flood / direct_seconds, 2),
    }  # fmt: skip
    ratio = direct_seconds / flood_seconds
    result["flood_throughput_ratio"] = round(ratio, 3)
    print(json.dumps(result, indent=2))
    print(f"uptime: {os.popen('uptime').read().strip()}")
    for name, (quiet_idle, quiet_flood) in {
        "job": (idle[0], during[0]), "page run": (idle[1], during[1])
    }.items():  # fmt: skip
        target = 1.5 * percentile(quiet_idle, 0.95) + 1.0
        got = percentile(quiet_flood, 0.95)
        verdict = "MEETS" if got <= target else "MISSES"
        print(f"quiet {name}: p95 {got:.3f} s during the flood vs target {target:.3f} s "
              f"(1.5 × idle p95 + 1 s): {verdict}")  # fmt: skip
    print(f"flooder: {result['flood_jobs_per_s']} jobs/s vs direct {result['direct_jobs_per_s_at_8']}: "
          f"ratio {ratio:.3f} ({'MEETS' if ratio >= 0.9 else 'MISSES'} >= 0.9)")  # fmt: skip


if __name__ == "__main__":
    main()
