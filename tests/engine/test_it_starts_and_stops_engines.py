"""engine.testing.run_engine: a subprocess on a free port, gone after the block."""

from __future__ import annotations

import httpx
import pytest

from engine.testing import run_engine


def test_it_yields_a_healthy_url_and_stops_the_process() -> None:
    with run_engine("scripted", max_logprobs=5, model_id="tiny") as url:
        assert url.startswith("http://127.0.0.1:")
        card = httpx.get(url + "/v1/models").json()["data"][0]
        assert card["id"] == "tiny" and card["capabilities"]["max_logprobs"] == 5
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health")


def test_it_reports_an_engine_that_cannot_start() -> None:
    with pytest.raises(RuntimeError, match="did not start"), run_engine("scripted", fault="{oops"):
        pass
