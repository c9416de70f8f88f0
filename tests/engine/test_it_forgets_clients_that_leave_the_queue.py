"""A client that gives up while waiting for the model never gets (or costs) a turn."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from engine.testing import run_engine


def test_it_drops_a_queued_request_whose_client_left() -> None:
    with run_engine("scripted", token_delay=0.05) as url:
        holding = threading.Event()
        release = threading.Event()

        def hold_the_model() -> None:
            body = {"prompt": "The cat", "max_tokens": 400, "stream": True}
            with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
                for _ in r.iter_lines():
                    holding.set()
                    if release.is_set():
                        return

        holder = threading.Thread(target=hold_the_model)
        holder.start()
        assert holding.wait(10)
        # No max_tokens: this one would run ~2,000 tokens x 0.05 s if it ever got a turn.
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "/v1/completions", json={"prompt": "The dog"}, timeout=0.3)
        release.set()
        holder.join(10)
        started = time.monotonic()
        r = httpx.post(url + "/v1/completions", json={"prompt": "A", "max_tokens": 2}, timeout=30)
        assert r.status_code == 200 and time.monotonic() - started < 1.5
