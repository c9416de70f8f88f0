"""Engine throughput over HTTP vs llama-cpp-python's own create_completion.

    .venv/bin/python bench/engine_throughput.py [--rounds 3] [--max-tokens 256]

Same model file, same Llama settings (n_ctx 2048, logits_all=True, the engine's default
thread count), same
prompt, temperature 0.8 with every other sampler off (top_k/top_p/min_p/penalties
neutral), one seed per round. Both sides stop at EOS or at max_tokens, so a side's
tokens/s is its completion tokens over its wall time; the rounds interleave the three
modes so that load from other processes hits them alike, and the ratio is taken between
per-mode medians (totals are printed too). Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.models import DEFAULT_N_CTX, default_gguf_path, default_threads  # noqa: E402
from engine.testing import run_engine  # noqa: E402

PROMPT = "Once upon a time, in a small village by the sea, there lived"


def baseline(llm: object, max_tokens: int, seed: int) -> int:
    out = llm.create_completion(  # type: ignore[attr-defined]
        PROMPT,
        max_tokens=max_tokens,
        temperature=0.8,
        top_k=0,
        top_p=1.0,
        min_p=0.0,
        repeat_penalty=1.0,
        seed=seed,
    )
    return out["usage"]["completion_tokens"]


def engine_json(client: httpx.Client, max_tokens: int, seed: int) -> int:
    body = {"prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0.8, "seed": seed}
    return client.post("/v1/completions", json=body).json()["usage"]["completion_tokens"]


def engine_stream(client: httpx.Client, max_tokens: int, seed: int) -> int:
    body = {
        "prompt": PROMPT,
        "max_tokens": max_tokens,
        "temperature": 0.8,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tokens = 0
    with client.stream("POST", "/v1/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if not chunk["choices"]:
                    tokens = chunk["usage"]["completion_tokens"]
    return tokens


def main() -> None:
    import llama_cpp

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=default_threads())
    args = ap.parse_args()
    threads = args.threads
    # The engine loads the weights without extra buffer types (engine/models.py: AMX
    # builds die on their first decode); the baseline loads them the same way.
    plain_defaults = llama_cpp.llama_cpp.llama_model_default_params

    def engine_defaults():
        params = plain_defaults()
        params.use_extra_bufts = False
        return params

    llama_cpp.llama_cpp.llama_model_default_params = engine_defaults
    llm = llama_cpp.Llama(
        str(default_gguf_path()),
        n_ctx=DEFAULT_N_CTX,
        logits_all=True,
        verbose=False,
        n_threads=threads,
        n_threads_batch=threads,
    )
    names = ("llama-cpp-python", "engine json", "engine stream")
    totals = {name: [0, 0.0] for name in names}
    rates: dict[str, list[float]] = {name: [] for name in names}
    with (
        run_engine("llama", n_threads=threads) as url,
        httpx.Client(base_url=url, timeout=300) as c,
    ):
        engine_json(c, 4, 0)  # warm both sides up
        baseline(llm, 4, 0)
        for r in range(args.rounds):
            seed = 1000 + r
            for name, run in (
                ("llama-cpp-python", lambda s: baseline(llm, args.max_tokens, s)),
                ("engine json", lambda s: engine_json(c, args.max_tokens, s)),
                ("engine stream", lambda s: engine_stream(c, args.max_tokens, s)),
            ):
                started = time.perf_counter()
                tokens = run(seed)
                secs = time.perf_counter() - started
                totals[name][0] += tokens
                totals[name][1] += secs
                rates[name].append(tokens / secs)
    print(f"prompt={PROMPT!r} max_tokens={args.max_tokens} temperature=0.8 threads={threads}")
    print("both sides stop at EOS or max_tokens; rate = completion tokens / wall time")
    median = {name: statistics.median(r) for name, r in rates.items()}
    for name, (tokens, secs) in totals.items():
        print(
            f"{name:18s} median {median[name]:6.1f} tok/s  "
            f"(total {tokens} tokens in {secs:.2f} s = {tokens / secs:.1f} tok/s; "
            f"runs: {', '.join(f'{r:.0f}' for r in rates[name])})"
        )
    base = median["llama-cpp-python"]
    print(f"ratio engine json / llama-cpp-python:   {median['engine json'] / base:.3f}")
    print(f"ratio engine stream / llama-cpp-python: {median['engine stream'] / base:.3f}")


if __name__ == "__main__":
    main()
