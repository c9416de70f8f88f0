"""Requests beyond the engine's sequence limit wait their turn, in arrival order; a
waiting stream gets its headers at once (as vLLM), so no client read timeout fires."""

from __future__ import annotations

import threading
import time

import httpx

from engine.testing import run_engine


def _arrivals(url: str, out: dict[str, list[float]], name: str, headers: list[float]) -> None:
    body = {"prompt": "The cat", "max_tokens": 4, "stream": True}
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
        headers.append(time.monotonic())
        for line in r.iter_lines():
            if line.startswith("data: {"):
                out.setdefault(name, []).append(time.monotonic())


def test_it_queues_requests_beyond_max_sequences_in_order() -> None:
    with run_engine("scripted", token_delay=0.1, max_sequences=1) as url:
        out: dict[str, list[float]] = {}
        headers: list[float] = []
        threads = []
        for name in ("first", "second", "third"):
            t = threading.Thread(target=_arrivals, args=(url, out, name, headers))
            t.start()
            threads.append(t)
            time.sleep(0.1)  # arrival order
        for t in threads:
            t.join(15)
    assert [len(out[n]) for n in ("first", "second", "third")] == [4, 4, 4]
    # one sequence: no interleaving (a turn starts as the last token before it is made;
    # the two clients may read those two tokens in either order), arrival order kept
    assert out["second"][0] > out["first"][-2] + 0.05
    assert out["third"][0] > out["second"][-2] + 0.05
    # every stream's headers came long before its turn
    assert len(headers) == 3 and max(headers) < out["second"][0]
