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
OTHERS = [  # streams that run while the request is batched with them; the first leaves
    # early, so the request's sequences also run beside freed cache cells
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
            leaves_early = body is OTHERS[0]
            body = {**body, "max_tokens": 1500, "stream": True}
            with httpx.stream("POST", url + "/v1/completions", json=body, timeout=120) as r:
                lines = r.iter_lines()
                next(lines)
                streaming.wait()
                count = 0
                for _ in lines:
                    count += 1
                    if done.is_set() or (leaves_early and count == 6):
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
    assert busy["running"] >= len(OTHERS) - 1 and len(chunks_after) == len(OTHERS)


@pytest.mark.parametrize("backend", ["scripted", pytest.param("llama", marks=pytest.mark.slow)])
def test_it_gives_the_same_samples_when_they_wait_for_a_sequence(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """With one sequence the n samples run one after another (the prompt evaluated again
    for each): still the same texts as when they run together."""
    from engine.testing import run_engine

    url = request.getfixturevalue(f"{backend}_url")
    body = {**REQUEST, "max_tokens": 12}
    with httpx.Client(base_url=url, timeout=120) as client:
        batched = _texts(client, body)
    with run_engine(backend, max_sequences=1) as one_url, httpx.Client(base_url=one_url) as c:
        one_by_one = _texts(c, body)
    assert one_by_one == batched
