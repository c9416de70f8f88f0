"""Requests are bounded by the KV cache too: one that needs more cells than are free
waits (in order) until a running one leaves, then runs."""

from __future__ import annotations

import threading
import time

import httpx

from engine.testing import run_engine


def test_it_holds_a_request_until_cells_are_free() -> None:
    # 64 cells in all: the first request reserves 4 + 50, the second needs 4 + 30.
    with run_engine("scripted", token_delay=0.02, max_model_len=64, kv_size=64) as url:
        ends: dict[str, float] = {}
        starts: dict[str, float] = {}

        def run(name: str, max_tokens: int) -> None:
            body = {"prompt": "The cat sat", "max_tokens": max_tokens, "stream": True}
            with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {"):
                        starts.setdefault(name, time.monotonic())
                ends[name] = time.monotonic()

        first = threading.Thread(target=run, args=("first", 50))
        first.start()
        while "first" not in starts:
            time.sleep(0.01)
        second = threading.Thread(target=run, args=("second", 30))
        second.start()
        time.sleep(0.2)
        health = httpx.get(url + "/health").json()
        first.join(30)
        second.join(30)
    assert health["running"] == 1 and health["waiting"] == 1
    assert starts["second"] > ends["first"] - 0.1
