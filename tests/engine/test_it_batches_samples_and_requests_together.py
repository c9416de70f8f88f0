"""The n samples of a request, and concurrent requests, advance together one token per
decode step (continuous batching) instead of one after another."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from engine.testing import run_engine


def _stream(url: str, body: dict, arrivals: list[tuple[float, int, int]]) -> None:
    """Appends (time, choice index, tokens of that choice so far) per chunk."""
    counts: dict[int, int] = {}
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                [choice] = json.loads(line[6:])["choices"]
                counts[choice["index"]] = counts.get(choice["index"], 0) + 1
                arrivals.append((time.monotonic(), choice["index"], counts[choice["index"]]))


@pytest.mark.parametrize("backend", ["scripted", pytest.param("llama", marks=pytest.mark.slow)])
def test_it_streams_every_sample_from_the_first_steps(backend: str) -> None:
    # The delay outlasts the prompt's evaluation: the first tokens are then drawn in a
    # step of their own, from the prompt's kept logits.
    with run_engine(backend, token_delay=0.1) as url:
        arrivals: list[tuple[float, int, int]] = []
        body = {"prompt": "The cat", "n": 4, "max_tokens": 12, "stream": True, "seed": 1}
        _stream(url, body, arrivals)
    assert len(arrivals) == 48
    firsts = [t for t, _, count in arrivals if count == 1]
    tenths = [t for t, _, count in arrivals if count == 10]
    assert len(firsts) == len(tenths) == 4 and max(firsts) < min(tenths)


def test_it_lets_a_new_request_join_a_running_one() -> None:
    with run_engine("scripted", token_delay=0.02) as url:
        long: list[tuple[float, int, int]] = []
        short: list[tuple[float, int, int]] = []
        first = threading.Thread(
            target=_stream,
            args=(url, {"prompt": "The dog", "max_tokens": 100, "stream": True}, long),
        )
        first.start()
        while len(long) < 5:
            time.sleep(0.01)
        joined = time.monotonic()
        _stream(url, {"prompt": "A bird", "max_tokens": 3, "stream": True}, short)
        first.join(30)
    assert len(long) == 100 and len(short) == 3
    # the short one did not wait for the long one: it was done while the long one ran
    assert short[0][0] - joined < 0.5 and short[-1][0] < long[-1][0] - 1.0
