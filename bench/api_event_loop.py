"""One client's stream while another client sends huge bodies to the same web process.

    .venv/bin/python bench/api_event_loop.py [--tokens 300] [--token-delay 0.02]
        [--prompts 1300000]

Starts its own Postgres, Redis, the ASGI server and the scripted engine. The streamer
reads a stream of --tokens tokens (one each --token-delay) twice: alone (the baseline)
and while a second client sends, back to back, bodies of --prompts one-token prompts
(~6.5 MB: each refused by the output-work rule). Prints, for both, the gap between
consecutive tokens (p50, p99, max) and how many huge bodies were answered meanwhile.
Target: no gap over 50 ms during the flood (a body parsed on the event loop stalls
every stream of the process for its seconds of parsing and validating).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stack import percentile, start_services, start_web  # noqa: E402
from engine.testing import run_engine  # noqa: E402
from launch.datadir import scratch_dir  # noqa: E402
from launch.supervisor import Supervisor  # noqa: E402


def stream(api: str, secret: str, tokens: int) -> list[float]:
    import httpx

    body = {"model": "scripted", "prompt": "Keep going", "max_tokens": tokens, "stream": True}
    arrivals: list[float] = []
    with httpx.stream("POST", f"{api}/completions", json=body, timeout=120,
                      headers={"Authorization": f"Bearer {secret}"}) as r:  # fmt: skip
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data: {") and '"choices":[{' in line:
                arrivals.append(time.perf_counter())
    return [b - a for a, b in zip(arrivals[5:], arrivals[6:], strict=False)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--token-delay", type=float, default=0.02)
    parser.add_argument("--prompts", type=int, default=1_300_000)
    args = parser.parse_args()
    scratch = scratch_dir("weft-bench-loop-")
    sup = Supervisor()
    try:
        env = start_services(scratch, sup, WEFT_API_RATE_PER_MINUTE="100000")
        with run_engine("scripted", token_delay=args.token_delay) as engine:
            env["WEFT_BACKEND_URL"] = f"{engine}/v1"
            os.environ.update(env)
            import django

            django.setup()
            import httpx
            from django.contrib.auth import get_user_model

            from api.models import ApiKey

            User = get_user_model()
            _, streamer = ApiKey.objects.create_key(User.objects.create_user("streamer"), "s")
            _, flooder = ApiKey.objects.create_key(User.objects.create_user("flooder"), "f")
            api = start_web(sup, env, 18900 + os.getpid() % 100) + "/v1"
            stream(api, streamer, 20)  # warm
            alone = stream(api, streamer, args.tokens)

            huge = json.dumps(
                {"model": "scripted", "prompt": [[1]] * args.prompts, "max_tokens": 1}
            )
            answered: list[int] = []
            stop = threading.Event()

            def flood() -> None:
                headers = {"Authorization": f"Bearer {flooder}", "Content-Type": "application/json"}
                with httpx.Client(timeout=120, headers=headers) as http:
                    while not stop.is_set():
                        answered.append(http.post(f"{api}/completions", content=huge).status_code)

            flooding = threading.Thread(target=flood, daemon=True)
            flooding.start()
            time.sleep(1.0)  # the flood is under way
            during = stream(api, streamer, args.tokens)
            stop.set()
            flooding.join(120)
    finally:
        sup.stop_all()

    def stats(gaps: list[float]) -> dict[str, float]:
        return {"p50_ms": round(percentile(gaps, 0.5) * 1000, 1),
                "p99_ms": round(percentile(gaps, 0.99) * 1000, 1),
                "max_ms": round(max(gaps) * 1000, 1)}  # fmt: skip

    result = {
        "body_bytes": len(huge), "tokens": args.tokens, "token_delay": args.token_delay,
        "alone": stats(alone), "during_flood": stats(during),
        "huge_bodies_answered": len(answered), "their_statuses": sorted(set(answered)),
    }  # fmt: skip
    print(json.dumps(result, indent=2))
    print(f"uptime: {os.popen('uptime').read().strip()}")
    worst = result["during_flood"]["max_ms"]
    print(f"largest gap during the flood {worst} ms vs {result['alone']['max_ms']} ms alone: "
          f"{'MEETS' if worst <= 50 else 'MISSES'} <= 50 ms")  # fmt: skip


if __name__ == "__main__":
    main()
