"""A client disconnecting mid-stream frees the model at once."""

from __future__ import annotations

import time

import httpx

from engine.testing import run_engine


def test_it_stops_generating_for_a_departed_client() -> None:
    with run_engine("scripted", token_delay=0.05) as url, httpx.Client(base_url=url) as client:
        body = {"prompt": "The cat", "max_tokens": 400, "stream": True}  # ~20 s if it ran on
        with client.stream("POST", "/v1/completions", json=body) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")
        started = time.monotonic()
        r = client.post("/v1/completions", json={"prompt": "The cat", "max_tokens": 3})
        assert r.status_code == 200
        assert time.monotonic() - started < 1.5
