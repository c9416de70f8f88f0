"""A full-vocabulary API job on the real model, through the worker and its harvest: the
peak memory each process gains, against the size of the body that passed through.

    .venv/bin/python bench/job_full_vocab_memory.py [--tokens 1024] [--threads 2]

Starts its own Postgres and Redis, the local engine (SmolLM2-135M, vocabulary 49,152:
~3.9 MB of JSON per prompt token), the ASGI server and one worker per pool. Submits one
job with a --tokens-token prompt and prompt_logprobs=-1, waits for it, then harvests it
gzipped and streamed. Reported: the body's bytes (the baseline: a job path that read the
body whole held several times that — the 400-token case grew a worker to 20.6 GB), the
growth of the worker's and the web process's peak RSS over the job and its harvest
(target: < 200 MB each), and the times of the run and the harvest.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stack import start_services, start_web  # noqa: E402
from config import lanes  # noqa: E402
from engine.testing import run_engine  # noqa: E402
from launch.datadir import scratch_dir  # noqa: E402
from launch.services import worker_command  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402

PREFIX = "bench-fullvocab"


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def job_status(http, job_id: str) -> tuple[str, bytes]:
    """The job's status from the head of its harvest (long-polled), read as a stream and
    left there: once it has succeeded the body holds the whole result (GBs here), which
    a client that parsed it whole would hold several times over."""
    head = b""
    with http.stream("GET", f"/harvest/{job_id}", params={"wait": "30"}) as r:
        for chunk in r.iter_bytes():
            head += chunk
            found = re.search(rb'"status"\s*:\s*"(\w+)"', head)
            if found:
                return found.group(1).decode(), head
            if len(head) > 1 << 20:
                break
    raise SystemExit(f"no status in the harvest's head: {head[:2000]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    scratch = scratch_dir("weft-bench-fullvocab-")
    sup = Supervisor()
    try:
        env = start_services(scratch, sup, WEFT_GENERATION_QUEUE=PREFIX,
                             WEFT_BACKEND_READ_TIMEOUT="600", WEFT_API_REQUEST_WINDOW_SECONDS="600",
                             WEFT_API_USER_MONTHLY_BUDGET=str(10**9))  # fmt: skip
        with run_engine("llama", n_threads=args.threads, startup_timeout=180,
                        max_model_len=max(2048, args.tokens + 16)) as engine:  # fmt: skip
            env["WEFT_BACKEND_URL"] = f"{engine}/v1"
            os.environ.update(env)
            import django

            django.setup()
            import httpx
            from django.contrib.auth import get_user_model

            from api.models import ApiKey

            _, secret = ApiKey.objects.create_key(get_user_model().objects.create_user("b"), "b")
            web = start_web(sup, env, 19000 + os.getpid() % 100)
            web_pid = next(p.pid for name, p, _ in sup.children if name == "web")
            pids = {"web": web_pid}
            for pool in lanes.worker_pools(PREFIX, 2, 2):
                log = scratch / f"{pool.name}.log"
                handle = open(log, "wb")  # noqa: SIM115 - lives as long as the worker
                proc = sup.start(pool.name, worker_command(sys.executable,
                    pool.concurrency, ",".join(pool.queues), name=f"{pool.name}@%h"),
                    env_vars=env, stdout=handle, stderr=handle)  # fmt: skip
                while b" ready." not in log.read_bytes():
                    time.sleep(0.1)
                pids[pool.name] = proc.pid
            http = httpx.Client(base_url=f"{web}/v1", timeout=900,
                                headers={"Authorization": f"Bearer {secret}"})  # fmt: skip
            model = http.get("/models").json()["data"][0]["id"]
            warm = http.post("/completions", json={"model": model, "prompt": "Hi", "max_tokens": 1},
                             headers={"Prefer": "respond-async"}).json()  # fmt: skip
            while job_status(http, warm["id"])[0] != "succeeded":
                pass
            before = {name: peak_mb(pid) for name, pid in pids.items()}
            body = {
                "model": model,
                "prompt": [504] * args.tokens,
                "max_tokens": 1,
                "prompt_logprobs": -1,
            }
            t0 = time.perf_counter()
            job = http.post("/completions", json=body, headers={"Prefer": "respond-async"}).json()
            while True:
                state, head = job_status(http, job["id"])
                if state not in ("queued", "running"):
                    break
            run_s = time.perf_counter() - t0
            if state != "succeeded":
                raise SystemExit(f"the job {state}: {head[:2000]!r}")
            t1 = time.perf_counter()
            unzip, size = zlib.decompressobj(31), 0
            with http.stream(
                "GET", f"/harvest/{job['id']}", headers={"Accept-Encoding": "gzip"}
            ) as r:
                for chunk in r.iter_raw():
                    size += len(unzip.decompress(chunk))
            harvest_s = time.perf_counter() - t1
            after = {name: peak_mb(pid) for name, pid in pids.items()}
    finally:
        sup.stop_all()
    growth = {name: round(after[name] - before[name], 1) for name in before}
    result = {
        "prompt_tokens": args.tokens, "job_object_bytes": size, "body_mb": round(size / 2**20, 1),
        "peak_rss_growth_mb": growth, "run_seconds": round(run_s, 1),
        "harvest_seconds": round(harvest_s, 1), "harvest_mb_per_s": round(size / 2**20 / harvest_s, 1),
    }  # fmt: skip
    print(json.dumps(result, indent=2))
    print(f"uptime: {os.popen('uptime').read().strip()}")
    worst = max(growth["bulk"], growth["web"])
    print(f"{result['body_mb']} MB through the worker and the harvest; peak RSS grew "
          f"{growth['bulk']} MB (worker) and {growth['web']} MB (web): "
          f"{'MEETS' if worst < 200 else 'MISSES'} < 200 MB")  # fmt: skip


if __name__ == "__main__":
    main()
