"""prompt_logprobs: -1 answers are sent chunked as they are encoded (never whole in
memory), in vLLM's shape, with the same numbers as a top-k answer."""

from __future__ import annotations

import json

import httpx


def test_it_streams_a_full_vocabulary_body(client: httpx.Client) -> None:
    card = client.get("/v1/models").json()["data"][0]
    ids = client.post("/tokenize", json={"prompt": "The cat sat on"}).json()["tokens"]
    body = {"model": card["id"], "prompt": ids, "max_tokens": 2, "n": 2, "seed": 3}
    chunks = 0
    with client.stream("POST", "/v1/completions", json={**body, "prompt_logprobs": -1}) as r:
        assert r.status_code == 200
        assert "content-length" not in r.headers
        assert r.headers["transfer-encoding"] == "chunked"
        raw = b""
        for chunk in r.iter_raw():
            raw += chunk
            chunks += 1
    assert chunks > 2
    full = json.loads(raw)
    top = client.post("/v1/completions", json={**body, "prompt_logprobs": 5}).json()
    assert [c["text"] for c in full["choices"]] == [c["text"] for c in top["choices"]]
    assert full["usage"] == top["usage"]
    plp = full["choices"][0]["prompt_logprobs"]
    assert full["choices"][1]["prompt_logprobs"] == plp
    assert len(plp) == len(ids) and plp[0] is None
    vocab = len(plp[1])
    small_plp = top["choices"][0]["prompt_logprobs"]
    for token, position, small in zip(ids[1:], plp[1:], small_plp[1:], strict=True):
        assert len(position) == vocab > 600
        assert next(iter(position)) == str(token)  # the actual token first, then by rank
        ranks = [v["rank"] for v in position.values()]
        assert ranks[1:] == sorted(ranks[1:]) and min(ranks) == 1
        for tid, entry in small.items():
            assert position[tid] == entry
