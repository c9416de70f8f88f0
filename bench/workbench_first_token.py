"""Workbench Run → first token on screen, beside the engine's own first-token time.

    .venv/bin/python bench/workbench_first_token.py [--runs 7] [--backend llama|scripted]
        [--max-tokens 8]

Starts a throw-away Postgres and Redis, one engine (the real model by default), the
ASGI server and a Celery worker, logs a user in with Debian's Chromium (Playwright) and
opens the Workbench. Each round measures, one right after the other (so both see the
same load on this shared 2-core box):

  direct     httpx + SSE straight to the engine, the same request the page sends; time
             from just before the request to the first chunk carrying text
  workbench  in the page: performance.now() just before Run is clicked, to the moment a
             MutationObserver sees the first character in a sample's live target —
             the POST, validation and budget reservation, the Celery hop, the
             WebSocket the new run opens, the engine's first token, the Channels group
             and the htmx swap, all of it

Printed: median and p90 of each, their ratio, and the Workbench's added milliseconds
(median of the per-round differences), with `uptime` beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stack import percentile, start_services, start_web  # noqa: E402
from config import lanes  # noqa: E402
from engine.testing import run_engine  # noqa: E402
from launch.datadir import scratch_dir  # noqa: E402
from launch.services import worker_command  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402

QUEUE = "bench-first-token"
QUEUES = ",".join(lanes.queue_name(pool, QUEUE) for pool in lanes.POOLS)
PROMPT = "The old lighthouse keeper opened the door and"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
PASSWORD = "bench-password-long"

# Installed before each click: resolves window.__firstToken with the time the first
# character of a sample appears in a run newer than the ones on the page.
WATCH = """() => {
  const known = new Set([...document.querySelectorAll('.run')].map((r) => r.id));
  window.__firstToken = null;
  const observer = new MutationObserver(() => {
    // A live target, or the saved result when the run ended before the socket joined.
    for (const pre of document.querySelectorAll('.run .sample-text')) {
      if (!known.has(pre.closest('.run').id) && pre.textContent.length > 0) {
        window.__firstToken = performance.now();
        observer.disconnect();
        return;
      }
    }
  });
  observer.observe(document.querySelector('#runs'), {subtree: true, childList: true, characterData: true});
  window.__clickedAt = performance.now();
  document.querySelector('#run-btn').click();
}"""


def direct_first_token(api: str, body: dict) -> float:
    """Milliseconds to the first chunk with text, straight from the engine."""
    t0 = time.perf_counter()
    with httpx.stream("POST", f"{api}/completions", json={**body, "stream": True}, timeout=60) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if any(c.get("text") for c in chunk.get("choices", [])):
                return (time.perf_counter() - t0) * 1000
    raise RuntimeError("the engine sent no text")


def start_worker(sup: Supervisor, env: dict[str, str], log: Path) -> None:
    handle = open(log, "wb")  # noqa: SIM115 - lives as long as the worker
    proc = sup.start(
        "worker", worker_command(sys.executable, 2, QUEUES, name=f"bench-{time.monotonic_ns()}@%h"),
        env_vars=env, stdout=handle, stderr=subprocess.STDOUT,
    )  # fmt: skip
    time.sleep(4)  # Celery logs "ready" at INFO only
    if proc.poll() is not None:
        raise SystemExit(f"the worker exited; see {log}")


def summary(name: str, values: list[float]) -> str:
    return (
        f"{name:<10} median {statistics.median(values):7.1f} ms   p90 {percentile(values, 0.9):7.1f} ms"
        f"   min {min(values):7.1f} ms   (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--backend", choices=["llama", "scripted"], default="llama")
    parser.add_argument("--max-tokens", type=int, default=8)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    scratch = scratch_dir("weft-bench-")  # as root, the services' user writes here
    sup = Supervisor()
    with run_engine(backend=args.backend, startup_timeout=120) as engine:
        try:
            env = start_services(
                scratch, sup, WEFT_MONTHLY_TOKEN_BUDGET=str(10**12), DATABASE_CONN_MAX_AGE="60",
                WEFT_BACKEND_URL=f"{engine}/v1", WEFT_GENERATION_QUEUE=QUEUE,
            )  # fmt: skip
            os.environ.update(env)
            import django

            django.setup()
            from django.contrib.auth import get_user_model

            get_user_model().objects.create_user("bench", password=PASSWORD)
            web = start_web(sup, env, 18000 + os.getpid() % 1000)
            start_worker(sup, env, scratch / "worker.log")
            model = httpx.get(f"{engine}/v1/models", timeout=10).json()["data"][0]["id"]
            body = {"model": model, "prompt": PROMPT, "max_tokens": args.max_tokens,
                    "temperature": 1.0, "seed": 1}  # fmt: skip
            direct_first_token(f"{engine}/v1", body)  # warm the engine up

            direct, page_ms = [], []
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{web}/login/")
                page.get_by_label("Username").fill("bench")
                page.get_by_label("Password").fill(PASSWORD)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_url(lambda u: "/login/" not in u)
                page.goto(f"{web}/workbench/")
                page.locator("#id_prompt").fill(PROMPT)
                page.locator("#id_max_tokens").fill(str(args.max_tokens))
                page.locator("#id_seed").fill("1")
                for round_ in range(args.runs + 1):  # the first round warms the stack up
                    d = direct_first_token(f"{engine}/v1", body)
                    page.evaluate(WATCH)
                    page.wait_for_function("window.__firstToken !== null", timeout=60_000)
                    w = page.evaluate("window.__firstToken - window.__clickedAt")
                    page.locator(".run").first.locator(".gen-state.state-done").wait_for(
                        timeout=60_000
                    )
                    if round_:
                        direct.append(d)
                        page_ms.append(w)
                browser.close()
        finally:
            sup.stop_all()

    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(
        f"Workbench Run → first token on screen, backend {args.backend}, max_tokens {args.max_tokens}"
    )
    print(f"uptime: {load}")
    print(summary("direct", direct))
    print(summary("workbench", page_ms))
    added = [w - d for w, d in zip(page_ms, direct, strict=True)]
    ratio = statistics.median(page_ms) / statistics.median(direct)
    print(f"ratio workbench/direct (medians) {ratio:.2f}; added by the Workbench: median "
          f"{statistics.median(added):.1f} ms, p90 {percentile(added, 0.9):.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
