"""A quiet user's latency while another user floods the service, and the flooder's own
throughput.

    .venv/bin/python bench/fairness.py [--flood 200] [--flood-tokens 64] [--samples 12]
        [--quiet-tokens 16] [--token-delay 0.01] [--engine scripted|real]

Starts its own Postgres, Redis, the ASGI server, the worker pools and an engine: the
scripted one (each sequence's tokens spaced --token-delay apart), or with --engine real
the local engine on the real SmolLM2 model, whose shared batched decode is where a
flood slows everybody down (the issue's figures: 60 flood jobs).

  idle     the quiet user, alone: --samples API jobs (submit, long-poll the harvest
           until it succeeds) and --samples Workbench-kind page runs (queued → done),
           one after another
  flood    the flooder submits --flood jobs of --flood-tokens tokens at once; while
           they are queued or running, the quiet user does the same samples again
Both, twice over, side by side in one run on the same services and engine: first
through today's setup — one worker pool of 8 threads for every run, first queued first
run (WEFT_SCHEDULER=arrival) — then through the lanes, owners taking turns; --rounds
times, alternating, so that load from other processes falls on both alike (the
throughput ratio is taken between the median windows, and printed per round).

Prints p50/p95 of the quiet user's job and page-run latency idle and during the flood
in both (target, for the lanes: p95 during ≤ 1.5 × idle + 1 s), and the flooder's
jobs/s through the lanes against today's FIFO (target ≥ 0.9).
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


async def phase(web: str, quiet_user, secrets: tuple[str, str], args) -> dict:
    """Idle samples, then the flood and the samples during it; the flood's window."""
    import httpx

    from completions.models import Generation

    quiet_body = {"model": args.model, "prompt": "Quiet", "max_tokens": args.quiet_tokens}
    flood_body = {"model": args.model, "max_tokens": args.flood_tokens}
    auth = lambda s: {"Authorization": f"Bearer {s}"}  # noqa: E731
    limits = httpx.Limits(max_connections=256)
    async with (
        httpx.AsyncClient(base_url=f"{web}/v1", headers=auth(secrets[0]), timeout=120) as quiet,
        httpx.AsyncClient(base_url=f"{web}/v1", headers=auth(secrets[1]), timeout=120,
                          limits=limits) as loud,
    ):  # fmt: skip
        await samples(quiet, quiet_user, quiet_body, 2)  # warm every path
        idle = await samples(quiet, quiet_user, quiet_body, args.samples)
        ids, _ = await flood(loud, flood_body, args.flood)
        during = await samples(quiet, quiet_user, quiet_body, args.samples)
        rows = Generation.objects.filter(public_id__in=ids)
        queued_after = await asyncio.to_thread(lambda: rows.filter(state="queued").count())
        while await asyncio.to_thread(lambda: rows.filter(state="done").count()) < len(ids):
            await asyncio.sleep(0.1)
        spans = await asyncio.to_thread(
            lambda: list(rows.values_list("created_at", "started_at", "finished_at"))
        )
    window = (max(s[2] for s in spans) - min(s[0] for s in spans)).total_seconds()
    return {"idle": idle, "during": during, "queued_after": queued_after, "window": window,
            "runs": sorted((s[2] - s[1]).total_seconds() for s in spans)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flood", type=int, default=200)
    parser.add_argument("--flood-tokens", type=int, default=64)
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--quiet-tokens", type=int, default=16)
    parser.add_argument("--token-delay", type=float, default=0.01)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--engine", choices=("scripted", "real"), default="scripted")
    args = parser.parse_args()
    args.model = "scripted"

    scratch = scratch_dir("weft-bench-fair-")
    sup = Supervisor()
    results: dict[str, dict] = {}
    try:
        env = start_services(
            scratch, sup, WEFT_GENERATION_QUEUE=PREFIX, DATABASE_CONN_MAX_AGE="60",
            WEFT_API_MAX_ACTIVE="64", WEFT_API_MAX_WAITING="512",
            WEFT_API_RATE_PER_MINUTE="100000", WEFT_MONTHLY_TOKEN_BUDGET=str(10**12),
            WEFT_API_USER_MONTHLY_BUDGET=str(10**12),
        )  # fmt: skip
        engine_run = (
            run_engine("llama", startup_timeout=180)
            if args.engine == "real"
            else run_engine("scripted", token_delay=args.token_delay)
        )
        with engine_run as engine:
            env["WEFT_BACKEND_URL"] = f"{engine}/v1"
            if args.engine == "real":
                import httpx

                args.model = httpx.get(f"{engine}/v1/models").json()["data"][0]["id"]
            os.environ.update(env)
            import django

            django.setup()
            from django.contrib.auth import get_user_model

            from api.models import ApiKey

            User = get_user_model()
            quiet_user = User.objects.create_user("quiet")
            flooder = User.objects.create_user("flooder")
            _, quiet_secret = ApiKey.objects.create_key(quiet_user, "quiet")
            _, flood_secret = ApiKey.objects.create_key(flooder, "flood")
            interactive = check_environment()["worker_concurrency"]
            bulk = check_environment()["bulk_concurrency"]
            both = tuple(lanes.queue_name(p, PREFIX) for p in lanes.POOLS)
            # Today's FIFO first (one pool of WEFT_WORKER_CONCURRENCY threads for every
            # run, first queued first run), then the lanes with owners in turn.
            setups = {
                "fifo": ({"WEFT_SCHEDULER": "arrival"},
                         [lanes.WorkerPool("all", both, FIFO_THREADS)]),
                "fair": ({"WEFT_SCHEDULER": "fair"},
                         list(lanes.worker_pools(PREFIX, interactive, bulk))),
            }  # fmt: skip
            rounds = [item for _ in range(args.rounds) for item in setups.items()]
            for name, (extra, pools) in rounds:
                run_env = {**env, **extra}
                os.environ.update(extra)
                from django.conf import settings

                settings.WEFT_SCHEDULER = extra["WEFT_SCHEDULER"]
                web = start_web(sup, run_env, 18700 + os.getpid() % 1000)
                for pool in pools:
                    start_pool(sup, run_env, pool, scratch / f"{name}-{pool.name}.log")
                secrets = (quiet_secret, flood_secret)
                got = asyncio.run(phase(web, quiet_user, secrets, args))
                into = results.setdefault(name, {"idle": ([], []), "during": ([], []),
                                                 "queued_after": [], "windows": [], "runs": []})  # fmt: skip
                for part in ("idle", "during"):
                    for i in (0, 1):
                        into[part][i].extend(got[part][i])
                into["queued_after"].append(got["queued_after"])
                into["windows"].append(got["window"])
                into["runs"].extend(got["runs"])
                for pool in pools:
                    sup.stop(f"worker-{pool.name}")
                sup.stop("web")
    finally:
        sup.stop_all()

    def stats(values: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(values, 0.5), 3), "p95": round(percentile(values, 0.95), 3)}

    out: dict = {"engine": args.engine, "flood_jobs": args.flood, "flood_tokens": args.flood_tokens,
                 "quiet_tokens": args.quiet_tokens, "token_delay": args.token_delay,
                 "pools": {"interactive": interactive, "bulk": bulk, "fifo": FIFO_THREADS}}  # fmt: skip
    for name, r in results.items():
        out[name] = {
            "quiet_job_seconds": {"idle": stats(r["idle"][0]), "flood": stats(r["during"][0])},
            "quiet_page_run_seconds": {"idle": stats(r["idle"][1]), "flood": stats(r["during"][1])},
            "flood_jobs_still_queued_after_the_quiet_samples": r["queued_after"],
            "flood_jobs_per_s": round(args.flood / percentile(r["windows"], 0.5), 2),
            "flood_jobs_per_s_each_round": [round(args.flood / w, 2) for w in r["windows"]],
            "flood_job_run_seconds_p50": round(percentile(r["runs"], 0.5), 3),
        }
    ratio = percentile(results["fifo"]["windows"], 0.5) / percentile(
        results["fair"]["windows"], 0.5
    )
    out["flood_throughput_fair_vs_fifo"] = round(ratio, 3)
    out["flood_throughput_fair_vs_fifo_each_round"] = [
        round(a / b, 3)
        for a, b in zip(results["fifo"]["windows"], results["fair"]["windows"], strict=True)
    ]
    print(json.dumps(out, indent=2))
    print(f"uptime: {os.popen('uptime').read().strip()}")
    fair = results["fair"]
    for label, i, slack in (("job", 0, 1.0), ("page run", 1, 0.5)):
        target = 1.5 * percentile(fair["idle"][i], 0.95) + slack
        got = percentile(fair["during"][i], 0.95)
        before = percentile(results["fifo"]["during"][i], 0.95)
        print(f"quiet {label}: p95 {got:.3f} s during the flood (FIFO: {before:.3f} s) vs target "
              f"{target:.3f} s (1.5 × idle p95 + {slack:g} s): {'MEETS' if got <= target else 'MISSES'}")  # fmt: skip
    print(f"flooder: {out['fair']['flood_jobs_per_s']} jobs/s vs {out['fifo']['flood_jobs_per_s']} "
          f"through today's FIFO: ratio {ratio:.3f} ({'MEETS' if ratio >= 0.9 else 'MISSES'} >= 0.9)")  # fmt: skip


if __name__ == "__main__":
    main()
