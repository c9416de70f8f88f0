"""Scripted fault: a budget clamp, announced in X-Acs-Max-Tokens-Clamped."""

from __future__ import annotations

import httpx


def test_it_generates_only_the_applied_tokens(scripted: httpx.Client) -> None:
    scripted.post("/_scripted/faults", json={"faults": [{"clamp": {"applied": 3}}]})
    r = scripted.post("/v1/completions", json={"prompt": "The cat", "max_tokens": 10})
    assert (
        r.headers["x-acs-max-tokens-clamped"]
        == "requested=10,applied=3,reason=budget,source=client"
    )
    assert r.json()["usage"]["completion_tokens"] == 3
    assert r.json()["choices"][0]["finish_reason"] == "length"


def test_it_names_the_default_when_max_tokens_was_omitted(scripted: httpx.Client) -> None:
    r = scripted.post(
        "/v1/completions",
        json={"prompt": [5, 6], "stream": True},
        headers={"X-Scripted-Fault": '{"clamp": {"applied": 2}}'},
    )
    max_len = scripted.get("/v1/models").json()["data"][0]["max_model_len"]
    assert r.headers["x-acs-max-tokens-clamped"] == (
        f"requested={max_len - 2},applied=2,reason=budget,source=default"
    )
    assert r.text.count('"finish_reason":"length"') == 1 and r.text.endswith("data: [DONE]\n\n")
