"""GET /_scripted/requests shows what the engine received (bodies and headers)."""

from __future__ import annotations

import httpx


def test_it_records_bodies_and_headers(scripted: httpx.Client) -> None:
    assert scripted.get("/_scripted/requests").json()["requests"] == []
    body = {"prompt": "The cat", "max_tokens": 2, "top_k": 5}
    scripted.post("/v1/completions", json=body, headers={"X-Acs-Workload": "batch"})
    scripted.post("/tokenize", json={"prompt": "x"})
    [first, second] = scripted.get("/_scripted/requests").json()["requests"]
    assert first["path"] == "/v1/completions" and first["body"] == body
    assert first["headers"]["x-acs-workload"] == "batch"
    assert second["path"] == "/tokenize"
    scripted.delete("/_scripted/requests")
    assert scripted.get("/_scripted/requests").json()["requests"] == []
