"""Inspect's full-vocabulary read, on the real model: peak memory of the web side
against the size of the answer it reads.

    .venv/bin/python bench/inspect_full_vocab_memory.py [--tokens 1024] [--threads 2]

Starts the local engine with SmolLM2-135M (vocabulary 49,152), builds a prompt of
--tokens tokens (checked with /tokenize), and sends one scoring request with
prompt_logprobs=-1 through the door (BackendClient.stream_raw) read by
inspector.fullvocab.complete — what the Inspect view does. Reported: the bytes of
the body, the process's peak RSS before and after (the growth is what the read
cost), the time, and the throughput. The baseline, side by side: the body's size
itself (parsing it whole with json.loads costs several times that; at 1,024
tokens it is ~3.9 GB of JSON, ~18 GB of objects, which this machine cannot hold).
No database or Redis is needed: the read touches neither.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# The read never touches them; settings only need well-formed values.
os.environ.setdefault("DATABASE_URL", "postgresql://bench@127.0.0.1:1/unused")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:1/0")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import django
    import httpx

    from engine.testing import run_engine

    with run_engine("llama", n_threads=args.threads, startup_timeout=180) as base:
        os.environ["WEFT_BACKEND_URL"] = f"{base}/v1"
        django.setup()
        from completions.client import BackendClient
        from completions.schema import validate_params
        from inspector import fullvocab

        model = httpx.get(f"{base}/v1/models").json()["data"][0]["id"]
        words = "Once upon a time there was a lighthouse keeper who counted ships. "
        prompt = words * (args.tokens // 10 + 10)
        while True:
            count = httpx.post(f"{base}/tokenize", json={"model": model, "prompt": prompt}).json()[
                "count"
            ]
            if count <= args.tokens:
                break
            prompt = prompt[: int(len(prompt) * args.tokens / count) - 1]
        params = validate_params(
            {
                "model": model,
                "prompt": prompt,
                "max_tokens": 1,
                "echo": True,
                "prompt_logprobs": -1,
                "stream": False,
            }  # fmt: skip
        )
        sizes: list[int] = []
        real_reader = fullvocab._Reader

        class Counting(real_reader):  # remember the body's size once read
            def read(self, n: int = -1) -> bytes:
                out = super().read(n)
                if not out:
                    sizes.append(self.size)
                return out

        fullvocab._Reader = Counting
        before = rss_mb()
        started = time.perf_counter()
        with BackendClient("interactive", read_timeout=600) as client:
            completion = fullvocab.complete(client, params)
        seconds = time.perf_counter() - started
        after = rss_mb()
        body = max(sizes) if sizes else 0
        positions = len(completion.body["choices"][0]["prompt_logprobs"])
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"model {model}, prompt {count} tokens, {positions} positions")
        print(
            f"body read: {body / 1e9:.2f} GB in {seconds:.1f} s ({body / 1e6 / seconds:.1f} MB/s)"
        )
        print(f"web-side peak RSS: {before:.0f} MB before, {after:.0f} MB after "
              f"(+{after - before:.0f} MB)")  # fmt: skip
        print(f"peak growth / body size: {(after - before) * 1e6 / max(body, 1):.5f}")
        print(f"uptime: {load}")


if __name__ == "__main__":
    main()
