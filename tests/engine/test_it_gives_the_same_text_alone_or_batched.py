"""A fixed seed gives the same text whether a request runs alone or batched with other
requests (every sampler row depends only on its own sequence), on both backends."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

REQUEST = {
    "prompt": "Once upon a time, in a quiet village,",
    "n": 3,
    "max_tokens": 24,
    "seed": 1234,
    "temperature": 0.9,
    "top_p": 0.95,
    "top_k": 50,
    "min_p": 0.02,
    "repetition_penalty": 1.1,
    "logprobs": 2,
}
OTHERS = [  # streams that run all the time the request is batched with them
    {"prompt": "The river ran", "n": 2, "temperature": 1.2},
    {"prompt": "Stone, wind and rain:", "logprobs": 1},
    {"prompt": "Two owls", "seed": 5, "presence_penalty": 0.5},
]


def _texts(client: httpx.Client, body: dict[str, Any]) -> list[tuple[str, list[float]]]:
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    return [(c["text"], c["logprobs"]["token_logprobs"]) for c in r.json()["choices"]]


@pytest.mark.parametrize("backend", ["scripted", pytest.param("llama", marks=pytest.mark.slow)])
def test_it_gives_the_same_text_alone_or_batched(
    backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(f"{backend}_url")
    with httpx.Client(base_url=url, timeout=120) as client:
        alone = _texts(client, REQUEST)
        streaming = threading.Barrier(len(OTHERS) + 1)
        done = threading.Event()
        chunks_after: list[int] = []

        def other(body: dict[str, Any]) -> None:
            body = {**body, "max_tokens": 1500, "stream": True}
            with httpx.stream("POST", url + "/v1/completions", json=body, timeout=120) as r:
                lines = r.iter_lines()
                next(lines)
                streaming.wait()
                count = 0
                for _ in lines:
                    count += 1
                    if done.is_set():
                        chunks_after.append(count)
                        return  # leaving cancels the rest

        threads = [threading.Thread(target=other, args=(b,)) for b in OTHERS]
        for t in threads:
            t.start()
        streaming.wait(60)
        batched = _texts(client, REQUEST)
        busy = client.get("/health").json()
        done.set()
        for t in threads:
            t.join(60)
    assert batched == alone
    assert len({text for text, _ in alone}) == 3  # three different samples
    assert busy["running"] == len(OTHERS) and len(chunks_after) == len(OTHERS)
