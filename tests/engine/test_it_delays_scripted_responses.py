"""Scripted faults: a slow first byte, a delay per token, a fixed server token rate."""

from __future__ import annotations

import time

import httpx

from engine.testing import run_engine

BODY = {"prompt": "The cat", "max_tokens": 5}


def test_it_delays_the_first_byte(scripted: httpx.Client) -> None:
    started = time.monotonic()
    r = scripted.post(
        "/v1/completions", json=BODY, headers={"X-Scripted-Fault": '{"first_byte_delay": 0.4}'}
    )
    assert r.status_code == 200 and time.monotonic() - started >= 0.4


def test_it_delays_each_token(scripted: httpx.Client) -> None:
    scripted.post("/_scripted/faults", json={"faults": [{"token_delay": 0.06}]})
    arrivals = []
    started = time.monotonic()
    with scripted.stream("POST", "/v1/completions", json={**BODY, "stream": True}) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                arrivals.append(time.monotonic() - started)
    assert len(arrivals) == 5 and arrivals[-1] >= 5 * 0.06
    assert arrivals[-1] - arrivals[0] >= 4 * 0.06  # spread out, not one burst


def test_it_runs_at_a_fixed_server_token_rate() -> None:
    with run_engine("scripted", token_delay=0.05) as url:
        started = time.monotonic()
        r = httpx.post(url + "/v1/completions", json={**BODY, "max_tokens": 6})
        elapsed = time.monotonic() - started
    assert r.json()["usage"]["completion_tokens"] == 6 and 0.3 <= elapsed < 2
