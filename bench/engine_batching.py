"""Continuous batching in the local engine (issue 12), as ratios measured in one run.

    .venv/bin/python bench/engine_batching.py [--threads N] [--rounds 2] [--skip-old]
        [--only 5] [--old-commit COMMIT]

Real model (SmolLM2-135M on llama.cpp) over HTTP. Every figure is a ratio of two runs
made side by side in this process, so load from other processes hits both alike:

1. aggregate tokens/s of one request with n=8 against n=1 (target >= 1.3x);
2. n=4 streaming: every sample has its first token before any has its tenth;
3. time to first token of a short request sent while a 256-token request streams,
   against its time alone (target <= 2x);
4. 16 concurrent requests: errors (target 0) and aggregate tokens/s against the same
   requests one at a time (target >= 1.3x);
5. full-vocabulary prompt_logprobs body MB/s against the engine before batching (commit
   2dae95f, or --old-commit, extracted with git archive and started from a temporary
   folder), with MB per CPU-second of the engine and of the reader (the bench itself,
   another process than the engine) beside the wall-clock rates.

Samples stop at EOS or max_tokens, so rates are completion tokens over wall time. Not a
test: it prints numbers (with the load average).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cpu import cpu_seconds, pid_serving  # noqa: E402
from engine.testing import _free_port, _healthy, run_engine  # noqa: E402

OLD_COMMIT = "2dae95f"
PROMPT = "Once upon a time, in a small village by the sea, there lived"


def complete(url: str, **body: Any) -> dict[str, Any]:
    r = httpx.post(url + "/v1/completions", json={"prompt": PROMPT, **body}, timeout=600)
    r.raise_for_status()
    return r.json()


def stream_times(url: str, **body: Any) -> list[tuple[float, int]]:
    """(arrival time, choice index) of every streamed token."""
    out: list[tuple[float, int]] = []
    body = {"prompt": PROMPT, **body, "stream": True}
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                choices = json.loads(line[6:])["choices"]
                if choices:
                    out.append((time.monotonic(), choices[0]["index"]))
    return out


def rate(url: str, n: int, max_tokens: int, seed: int) -> float:
    started = time.monotonic()
    body = complete(url, n=n, max_tokens=max_tokens, seed=seed, temperature=0.8)
    return body["usage"]["completion_tokens"] / (time.monotonic() - started)


def n8_vs_n1(url: str, rounds: int) -> tuple[float, float]:
    one, eight = [], []
    for r in range(rounds):
        one.append(rate(url, 1, 128, seed=r))
        eight.append(rate(url, 8, 128, seed=r))
    return statistics.median(one), statistics.median(eight)


def n4_together(url: str) -> tuple[bool, float, float]:
    arrivals = stream_times(url, n=4, max_tokens=32, seed=7, temperature=0.8)
    counts: dict[int, int] = {}
    firsts, tenths = [], []
    start = arrivals[0][0]
    for t, index in arrivals:
        counts[index] = counts.get(index, 0) + 1
        if counts[index] == 1:
            firsts.append(t - start)
        if counts[index] == 10:
            tenths.append(t - start)
    ok = len(firsts) == 4 and len(tenths) == 4 and max(firsts) < min(tenths)
    return ok, max(firsts), min(tenths) if tenths else float("nan")


def ttft(url: str, **body: Any) -> float:
    started = time.monotonic()
    body = {"prompt": "The cat", "max_tokens": 4, **body, "stream": True}
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                return time.monotonic() - started
    raise RuntimeError("no token")


def short_beside_long(url: str, rounds: int) -> tuple[float, float]:
    alone, beside = [], []
    for r in range(rounds):
        alone.append(ttft(url, seed=r))
        streaming = threading.Event()

        def long_one(streaming: threading.Event = streaming) -> None:
            body = {"prompt": PROMPT, "max_tokens": 256, "stream": True, "seed": 1}
            with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as resp:
                for i, _ in enumerate(resp.iter_lines()):
                    if i > 20:
                        streaming.set()

        t = threading.Thread(target=long_one)
        t.start()
        streaming.wait(120)
        beside.append(ttft(url, seed=r))
        t.join()
    return statistics.median(alone), statistics.median(beside)


def concurrent16(url: str, max_tokens: int = 48) -> tuple[int, float, float]:
    def one(i: int) -> int:
        return complete(url, max_tokens=max_tokens, seed=100 + i, temperature=0.8)["usage"][
            "completion_tokens"
        ]

    started = time.monotonic()
    sequential = sum(one(i) for i in range(16))
    seq_rate = sequential / (time.monotonic() - started)
    errors = 0
    tokens: list[int] = []

    def worker(i: int) -> None:
        nonlocal errors
        try:
            tokens.append(one(i))
        except httpx.HTTPError:
            errors += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors, seq_rate, sum(tokens) / (time.monotonic() - started)


def full_vocab_rate(url: str, rounds: int, prompt_tokens: int = 48) -> dict[str, float]:
    """Medians over `rounds` requests: MB/s over the whole request, MB/s from the body's
    first byte to its last, and MB per CPU-second of the engine and of this reader (CPU
    figures hardly move with other load on the machine; wall-clock ones do). Every byte
    is read, as it comes (no re-chunking)."""
    ids = httpx.post(url + "/tokenize", json={"prompt": PROMPT * 8}).json()["tokens"]
    body = {"prompt": ids[:prompt_tokens], "max_tokens": 1, "prompt_logprobs": -1, "seed": 1}
    pids = {"engine": pid_serving(url), "reader": os.getpid()}
    runs: list[dict[str, float]] = []
    with httpx.Client(timeout=600) as client:
        for _ in range(rounds + 1):  # the first warms the engine's encoder tables
            size = 0
            cpu0 = cpu_seconds(pids)
            started = time.monotonic()
            first = None
            with client.stream("POST", url + "/v1/completions", json=body) as r:
                for chunk in r.iter_raw():
                    first = first or time.monotonic()
                    size += len(chunk)
            ended = time.monotonic()
            cpu1 = cpu_seconds(pids)
            mb = size / 1e6
            runs.append(
                {
                    "mb": mb,
                    "whole": mb / (ended - started),
                    "body": mb / (ended - (first or started)),
                    **{f"{n}_mb_per_cpu_s": mb / max(1e-3, cpu1[n] - cpu0[n]) for n in pids},
                }
            )
    return {k: statistics.median(run[k] for run in runs[1:]) for k in runs[0]}


def full_vocab_line(
    new: dict[str, float], old: dict[str, float] | None, commit: str = OLD_COMMIT
) -> str:
    text = (
        f"5. full-vocabulary body ({new['mb']:.0f} MB): {new['whole']:.0f} MB/s end to end "
        f"(target >= 150), {new['body']:.0f} from the first byte; "
        f"{new['engine_mb_per_cpu_s']:.0f} MB per engine CPU-second, reader "
        f"{new['reader_mb_per_cpu_s']:.0f}"
    )
    if old is not None:
        text += (
            f"; the engine at {commit}: {old['whole']:.0f} MB/s end to end = "
            f"{new['whole'] / old['whole']:.2f}x, {old['body']:.0f} from the first byte, "
            f"{old['engine_mb_per_cpu_s']:.0f} MB per engine CPU-second"
        )
    return text


@contextlib.contextmanager
def old_engine(threads: int | None, commit: str = OLD_COMMIT) -> Iterator[str]:
    """The engine as of a commit (OLD_COMMIT: before batching), from a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="weft-old-engine-") as folder:
        archive = subprocess.run(
            ["git", "archive", commit, "engine"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        port = _free_port()
        cmd = [sys.executable, "-m", "engine", "--port", str(port)]
        if threads:
            cmd += ["--n-threads", str(threads)]
        env = {**os.environ, "PYTHONPATH": folder}
        proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while not _healthy(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the old engine did not start")
                time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


def steps_one_to_four(url: str, rounds: int) -> None:
    one, eight = n8_vs_n1(url, rounds)
    print(
        f"1. n=8 vs n=1 aggregate: {eight:.0f} vs {one:.0f} tok/s = {eight / one:.2f}x "
        "(target >= 1.3x)"
    )
    ok, last_first, first_tenth = n4_together(url)
    print(
        f"2. n=4 streaming: last first token at {last_first * 1000:.0f} ms, first tenth "
        f"token at {first_tenth * 1000:.0f} ms: {'all together' if ok else 'NOT together'}"
    )
    alone, beside = short_beside_long(url, rounds)
    print(
        f"3. short request's first token beside a 256-token stream: {beside * 1000:.0f} "
        f"vs {alone * 1000:.0f} ms alone = {beside / alone:.2f}x (target <= 2x)"
    )
    errors, seq_rate, conc_rate = concurrent16(url)
    print(
        f"4. 16 concurrent requests: {errors} errors, {conc_rate:.0f} vs {seq_rate:.0f} "
        f"tok/s one at a time = {conc_rate / seq_rate:.2f}x (target >= 1.3x)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=None, help="llama.cpp threads (both engines)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--skip-old", action="store_true", help="no baseline engine (step 5)")
    p.add_argument("--only", choices=["5"], help="step 5 alone")
    p.add_argument(
        "--old-commit",
        default=OLD_COMMIT,
        help=f"the engine step 5 compares against (default {OLD_COMMIT}, before batching)",
    )
    args = p.parse_args()
    print("uptime:", os.popen("uptime").read().strip())
    with run_engine("llama", n_threads=args.threads, startup_timeout=120) as url:
        complete(url, max_tokens=8)  # warm up
        if not args.only:
            steps_one_to_four(url, args.rounds)
        new = full_vocab_rate(url, args.rounds)
        print("uptime:", os.popen("uptime").read().strip())
        if args.skip_old:
            print(full_vocab_line(new, None))
        else:
            with old_engine(args.threads, args.old_commit) as old_url:
                old = full_vocab_rate(old_url, args.rounds)
            print(full_vocab_line(new, old, args.old_commit))
    print("uptime:", os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
