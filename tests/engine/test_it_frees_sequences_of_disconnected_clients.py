"""A client that leaves mid-stream or mid-generation frees its sequences and cache cells
before the next decode step, while the requests batched with it go on."""

from __future__ import annotations

import threading
import time

import httpx

from engine.testing import run_engine


def _wait_for(url: str, predicate, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        health = httpx.get(url + "/health").json()
        if predicate(health) or time.monotonic() > deadline:
            return health
        time.sleep(0.02)


def test_it_frees_the_sequences_of_a_departed_stream() -> None:
    with run_engine("scripted", token_delay=0.02) as url, httpx.Client(base_url=url) as client:
        stays: list[str] = []
        started = threading.Event()

        def stay() -> None:
            body = {"prompt": "The owl", "max_tokens": 150, "stream": True}
            with client.stream("POST", "/v1/completions", json=body, timeout=30) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        stays.append(line)
                        started.set()

        staying = threading.Thread(target=stay)
        staying.start()
        assert started.wait(10)
        body = {"prompt": "The cat", "n": 4, "max_tokens": 1500, "stream": True}
        with client.stream("POST", "/v1/completions", json=body) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")
            busy = client.get("/health").json()
        assert busy["sequences"] == 5 and busy["kv_used"] > 4 * 1500
        after = _wait_for(url, lambda h: h["sequences"] == 1)
        assert after["sequences"] == 1 and after["kv_used"] == 3 + 150  # the staying one
        staying.join(30)
        assert stays[-1] == "data: [DONE]" and len(stays) == 151
        idle = _wait_for(url, lambda h: h["sequences"] == 0)
        assert idle["kv_used"] == 0 and idle["running"] == idle["waiting"] == 0


def test_it_frees_the_sequences_of_a_departed_json_client() -> None:
    with run_engine("scripted", token_delay=0.02) as url:
        body = {"prompt": "The cat", "n": 2, "max_tokens": 1000}
        try:
            httpx.post(url + "/v1/completions", json=body, timeout=0.5)
        except httpx.ReadTimeout:
            pass
        health = _wait_for(url, lambda h: h["sequences"] == 0)
        assert health["sequences"] == 0 and health["kv_used"] == 0
