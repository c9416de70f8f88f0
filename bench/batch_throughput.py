"""A batch through the batch machinery vs the same requests from a plain asyncio client.

    .venv/bin/python bench/batch_throughput.py [--prompts 1000] [--concurrency 8]
        [--max-tokens 64] [--token-delay 0.02]

Starts its own throw-away Postgres and Redis, the ASGI server, one Celery worker and
two identical scripted engines (each request's tokens spaced --token-delay apart, so
a request takes what a real one of that length would). Both halves start at the same
instant, so both see the same machine load (this box has 2 shared cores):

  batch     the prompts uploaded as a JSONL file to the Batch page (the web process
            parses and counts them, checks the budget, stores them), then fed to the
            worker WEFT_BATCH_CONCURRENCY at a time as the door's Generations (stream,
            checkpoint, settle, copy into the batch), engine A; a WebSocket watches the
            progress until the batch is done
  direct    the same request bodies (as the door sends them: JSON, not streamed,
            logprobs 0) from httpx.AsyncClient with a semaphore of the same size,
            engine B

Prints prompts per second of each, their ratio (target >= 0.9), and the web process's
RSS sampled through the run (target: flat; the growth from the first sample after the
upload to the last).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stack import start_services, start_web  # noqa: E402
from config import lanes  # noqa: E402
from engine.testing import run_engine  # noqa: E402
from launch.datadir import scratch_dir  # noqa: E402
from launch.services import worker_command  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402

QUEUE = "bench-batch"
QUEUES = ",".join(lanes.queue_name(pool, QUEUE) for pool in lanes.POOLS)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_worker(sup: Supervisor, env: dict[str, str], threads: int, log: Path):
    handle = open(log, "wb")  # noqa: SIM115 - lives as long as the worker
    proc = sup.start("worker", worker_command(sys.executable, threads, QUEUES, name=f"bench-{os.getpid()}@%h"),
                     env_vars=env, stdout=handle, stderr=handle)  # fmt: skip
    deadline = time.monotonic() + 60
    while b" ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    return proc


async def direct(api: str, bodies: list[dict], concurrency: int) -> tuple[float, int]:
    """Every body sent, at most `concurrency` at once; (seconds, tokens read)."""
    import httpx

    gate = asyncio.Semaphore(concurrency)
    tokens = 0

    async def one(client: httpx.AsyncClient, body: dict) -> None:
        nonlocal tokens
        async with gate:
            response = await client.post(f"{api}/completions", json=body)
            response.raise_for_status()
            tokens += response.json()["usage"]["completion_tokens"]

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(one(client, body) for body in bodies))
        return time.perf_counter() - t0, tokens


async def through_batch(web: str, cookie: str, jsonl: bytes, form: dict, web_pid: int):
    """Upload, then watch the batch's socket until it is done; (seconds, upload seconds,
    batch id, RSS samples in MB)."""
    import httpx
    import websockets

    samples: list[float] = []
    async with httpx.AsyncClient(base_url=web, cookies={"sessionid": cookie}, timeout=300) as c:
        page = (await c.get("/batch/")).text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        t0 = time.perf_counter()
        response = await c.post(
            "/batch/new/", data={**form, "csrfmiddlewaretoken": token},
            files={"file": ("prompts.jsonl", jsonl, "application/x-ndjson")},
            headers={"Referer": f"{web}/batch/"},
        )  # fmt: skip
        uploaded = time.perf_counter() - t0
        if response.status_code != 302:
            raise SystemExit(f"upload refused ({response.status_code}): {response.text[-1500:]}")
    batch_id = int(response.headers["location"].strip("/").split("/")[-1])
    url = web.replace("http://", "ws://") + f"/ws/batches/{batch_id}/"
    headers = {"Cookie": f"sessionid={cookie}", "Origin": web}
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        last_sample = 0.0
        while True:
            message = await asyncio.wait_for(ws.recv(), 300)
            if time.perf_counter() - last_sample > 0.5:
                samples.append(rss_mb(web_pid))
                last_sample = time.perf_counter()
            if 'data-state="done"' in message:
                break
    samples.append(rss_mb(web_pid))
    return time.perf_counter() - t0, uploaded, batch_id, samples


def _phases(batch) -> dict[str, float]:
    """Median milliseconds per generation: fed -> claimed by a worker, claimed ->
    finished (the stream), finished -> the batch row recorded it."""
    import statistics

    rows = list(
        batch.items.select_related("generation").values_list(
            "generation__created_at", "generation__started_at", "generation__finished_at",
            "finished_at",
        )
    )  # fmt: skip

    def ms(pairs):
        return round(statistics.median((b - a).total_seconds() * 1000 for a, b in pairs), 1)

    return {
        "median_ms_fed_to_claimed": ms((r[0], r[1]) for r in rows),
        "median_ms_claimed_to_finished": ms((r[1], r[2]) for r in rows),
        "median_ms_finished_to_recorded": ms((r[2], r[3]) for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--token-delay", type=float, default=0.02, help="seconds per token")
    args = parser.parse_args()

    scratch = scratch_dir("weft-bench-batch-")
    sup = Supervisor()
    try:
        env = start_services(
            scratch, sup, WEFT_MONTHLY_TOKEN_BUDGET=str(10**12), DATABASE_CONN_MAX_AGE="60",
            WEFT_GENERATION_QUEUE=QUEUE, WEFT_BATCH_CONCURRENCY=str(args.concurrency),
        )  # fmt: skip
        opts = {"token_delay": args.token_delay}
        with run_engine("scripted", **opts) as engine_a, run_engine("scripted", **opts) as engine_b:
            env["WEFT_BACKEND_URL"] = f"{engine_a}/v1"
            os.environ.update(env)
            import django

            django.setup()
            from django.contrib.auth import get_user_model
            from django.test import Client

            from batch.models import Batch

            user = get_user_model().objects.create_user("bench", password="bench-password-long")
            client = Client()
            client.force_login(user)
            cookie = client.cookies["sessionid"].value
            web = start_web(sup, env, 18500 + os.getpid() % 1000)
            web_pid = next(p.pid for name, p, _ in sup.children if name == "web")
            # Two threads more than the batch takes: the pages keep theirs.
            start_worker(sup, env, args.concurrency + 2, scratch / "worker.log")

            prompts = [f"Item {i}: once upon a time" for i in range(args.prompts)]
            jsonl = "\n".join(json.dumps({"prompt": p, "id": i}) for i, p in enumerate(prompts))
            form = {"model": "scripted", "n": "1", "max_tokens": str(args.max_tokens),
                    "temperature": "1.0", "format": "jsonl", "title": "bench"}  # fmt: skip
            # As the door sends each of them (completions.pipeline.prepare).
            bodies = [{"model": "scripted", "prompt": p, "max_tokens": args.max_tokens,
                       "logprobs": 0, "stream": False}
                      for p in prompts]  # fmt: skip

            async def both():
                return await asyncio.gather(
                    through_batch(web, cookie, jsonl.encode(), form, web_pid),
                    direct(f"{engine_b}/v1", bodies, args.concurrency),
                )

            (batch_s, upload_s, batch_id, rss), (direct_s, direct_tokens) = asyncio.run(both())
            batch = Batch.objects.get(pk=batch_id)
            progress = batch.progress()
            phases = _phases(batch)
            if progress["done"] != args.prompts:
                raise SystemExit(f"batch ended with {progress}")
    finally:
        sup.stop_all()
    ratio = direct_s / batch_s
    growth = rss[-1] - rss[0]
    result = {
        "prompts": args.prompts,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "token_delay": args.token_delay,
        "batch_seconds": round(batch_s, 2),
        "batch_upload_seconds": round(upload_s, 2),
        "direct_seconds": round(direct_s, 2),
        "batch_prompts_per_s": round(args.prompts / batch_s, 2),
        "direct_prompts_per_s": round(args.prompts / direct_s, 2),
        "throughput_ratio": round(ratio, 3),
        # The same without the upload (parse, count every prompt, store): the feeding alone.
        "throughput_ratio_after_upload": round(direct_s / (batch_s - upload_s), 3),
        "batch_completion_tokens": progress["tokens"],
        "direct_tokens": direct_tokens,
        "web_rss_mb_first_last_max": [round(rss[0], 1), round(rss[-1], 1), round(max(rss), 1)],
        "web_rss_samples": len(rss),
        **phases,
    }
    print(json.dumps(result, indent=2))
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(
        f"batch {result['batch_prompts_per_s']} vs direct {result['direct_prompts_per_s']} "
        f"prompts/s: ratio {ratio:.3f} ({'MEETS' if ratio >= 0.9 else 'MISSES'} >= 0.9); web RSS "
        f"{rss[0]:.0f} -> {rss[-1]:.0f} MB over the run (max {max(rss):.0f}, growth {growth:+.1f} MB)"
    )


if __name__ == "__main__":
    main()
