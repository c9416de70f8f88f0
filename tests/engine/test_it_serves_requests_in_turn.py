"""Requests that arrive while the model is busy wait their turn (one model context)."""

from __future__ import annotations

import threading
import time

import httpx

from engine.testing import run_engine


def _arrivals(url: str, out: list[float], started: threading.Event | None = None) -> None:
    body = {"prompt": "The cat", "max_tokens": 4, "stream": True}
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                out.append(time.monotonic())
                if started:
                    started.set()


def test_it_runs_one_request_at_a_time() -> None:
    with run_engine("scripted", token_delay=0.05) as url:
        first: list[float] = []
        second: list[float] = []
        first_running = threading.Event()
        a = threading.Thread(target=_arrivals, args=(url, first, first_running))
        a.start()
        assert first_running.wait(10)  # the first request holds the model now
        b = threading.Thread(target=_arrivals, args=(url, second))
        b.start()
        a.join(10)
        b.join(10)
    assert len(first) == len(second) == 4
    assert second[0] > first[-1]  # no interleaving
