"""The same conformance checks over real HTTP against both model backends."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

PROMPT = "The cat sat on the"


def card(client: httpx.Client) -> dict[str, Any]:
    return client.get("/v1/models").json()["data"][0]


def complete(client: httpx.Client, **body: Any) -> dict[str, Any]:
    body.setdefault("model", card(client)["id"])
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def tokenize(client: httpx.Client, text: str) -> list[int]:
    return client.post("/tokenize", json={"prompt": text}).json()["tokens"]


def stream(client: httpx.Client, **body: Any) -> list[Any]:
    """All SSE payloads, '[DONE]' included as a string."""
    body.setdefault("model", card(client)["id"])
    events: list[Any] = []
    with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_it_lists_the_model(client: httpx.Client) -> None:
    r = client.get("/v1/models")
    assert r.status_code == 200 and r.headers["x-request-id"]
    body = r.json()
    assert body["object"] == "list" and len(body["data"]) == 1
    m = body["data"][0]
    assert m["object"] == "model" and m["default"] is True
    assert isinstance(m["id"], str) and isinstance(m["root"], str) and m["id"] != m["root"]
    assert m["max_model_len"] > 0
    caps = m["capabilities"]
    assert {k: caps[k] for k in ("max_logprobs", "full_vocab_max_prompt_tokens")} == {
        "max_logprobs": 20,
        "full_vocab_max_prompt_tokens": 1024,
    }
    # The vocabulary's size, for the door's worst-case estimate of a stored result.
    assert isinstance(caps["vocab_size"], int) and caps["vocab_size"] > 0
    assert set(caps) == {"max_logprobs", "full_vocab_max_prompt_tokens", "vocab_size"}


def test_it_reports_health(client: httpx.Client) -> None:
    r = client.get("/health")
    assert r.status_code == 200 and r.headers["x-request-id"]


def test_it_answers_a_completion_in_vllm_shape(client: httpx.Client) -> None:
    r = client.post(
        "/v1/completions", json={"model": card(client)["id"], "prompt": PROMPT, "max_tokens": 4}
    )
    assert r.status_code == 200 and r.headers["x-request-id"].startswith("req-")
    body = r.json()
    assert body["id"].startswith("cmpl-") and body["object"] == "text_completion"
    assert body["model"] == card(client)["root"]
    [choice] = body["choices"]
    assert set(choice) >= {"index", "text", "logprobs", "finish_reason", "stop_reason"}
    assert choice["index"] == 0 and choice["logprobs"] is None
    assert choice["finish_reason"] in ("length", "stop")
    usage = body["usage"]
    assert usage["prompt_tokens"] == len(tokenize(client, PROMPT))
    assert 1 <= usage["completion_tokens"] <= 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_it_orders_choices_by_prompt_then_sample(client: httpx.Client) -> None:
    prompts = ["The dog", "A bird"]
    body = complete(client, prompt=prompts, n=2, max_tokens=3, echo=True, seed=5)
    choices = body["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2, 3]
    assert [c["text"].startswith(prompts[i // 2]) for i, c in enumerate(choices)] == [True] * 4
    expected_prompt = sum(len(tokenize(client, p)) for p in prompts)
    assert body["usage"]["prompt_tokens"] == expected_prompt


def test_it_is_deterministic_when_greedy(client: httpx.Client) -> None:
    a = complete(client, prompt=PROMPT, max_tokens=6, temperature=0, n=2, seed=1)
    b = complete(client, prompt=PROMPT, max_tokens=6, temperature=0, seed=99)
    texts = {c["text"] for c in a["choices"] + b["choices"]}
    assert len(texts) == 1


def test_it_reproduces_a_seeded_draw(client: httpx.Client) -> None:
    draws = [
        [c["text"] for c in complete(client, prompt=PROMPT, max_tokens=6, n=2, seed=s)["choices"]]
        for s in (7, 7, 8, 9)
    ]
    assert draws[0] == draws[1]
    # n samples are independent draws, and other seeds give other draws
    assert len({t for d in draws for t in d}) >= 3


def test_it_stops_at_a_stop_string(client: httpx.Client) -> None:
    full = complete(client, prompt=PROMPT, max_tokens=8, temperature=0)["choices"][0]["text"]
    stop = full[len(full) // 2 : len(full) // 2 + 2]
    expected = full[: full.find(stop)]
    body = complete(client, prompt=PROMPT, max_tokens=8, temperature=0, stop=["\u2603", stop])
    [choice] = body["choices"]
    assert choice["text"] == expected
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == stop
    unstopped = complete(client, prompt=PROMPT, max_tokens=8, temperature=0, stop="\u2603")
    assert unstopped["choices"][0]["stop_reason"] is None


def test_it_streams_the_same_text_as_it_answers(client: httpx.Client) -> None:
    params = dict(prompt=[PROMPT, "One two"], n=2, max_tokens=5, seed=3, logprobs=1)
    whole = complete(client, **params)
    events = stream(client, **params, stream_options={"include_usage": True})
    assert events[-1] == "[DONE]"
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"] == whole["usage"]
    texts: dict[int, str] = {}
    tokens: dict[int, list[str]] = {}
    finish: dict[int, str] = {}
    for chunk in events[:-2]:
        [c] = chunk["choices"]  # one choice per chunk
        assert chunk["usage"] is None
        texts[c["index"]] = texts.get(c["index"], "") + c["text"]
        tokens.setdefault(c["index"], []).extend(c["logprobs"]["tokens"])
        if c["finish_reason"]:
            finish[c["index"]] = c["finish_reason"]
    for c in whole["choices"]:
        assert texts[c["index"]] == c["text"]
        assert tokens[c["index"]] == c["logprobs"]["tokens"]
        assert finish[c["index"]] == c["finish_reason"]


def test_it_streams_running_usage(client: httpx.Client) -> None:
    events = stream(
        client, prompt=PROMPT, max_tokens=3, stream_options={"continuous_usage_stats": True}
    )
    chunks = events[:-1]
    assert events[-1] == "[DONE]" and all(c["choices"] for c in chunks)  # no usage frame
    assert [c["usage"]["completion_tokens"] for c in chunks] == list(range(1, len(chunks) + 1))


def test_it_returns_completion_logprobs(client: httpx.Client) -> None:
    body = complete(client, prompt=PROMPT, max_tokens=4, logprobs=3, temperature=0)
    lp = body["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 4
    assert lp["text_offset"][0] == 0
    for token, logprob, top in zip(
        lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True
    ):
        assert 3 <= len(top) <= 4 and top[token] == logprob
        assert logprob == max(top.values())  # greedy picks the top raw token
    zero = complete(client, prompt=PROMPT, max_tokens=2, logprobs=0)["choices"][0]["logprobs"]
    assert [len(t) for t in zero["top_logprobs"]] == [1, 1]


@pytest.mark.parametrize("k", [0, 2])
def test_it_returns_top_k_prompt_logprobs(client: httpx.Client, k: int) -> None:
    ids = tokenize(client, PROMPT)
    body = complete(client, prompt=PROMPT, max_tokens=1, n=2, prompt_logprobs=k, seed=1)
    plp = body["choices"][0]["prompt_logprobs"]
    assert body["choices"][1]["prompt_logprobs"] == plp
    assert len(plp) == len(ids) and plp[0] is None
    for token, position in zip(ids[1:], plp[1:], strict=True):
        assert next(iter(position)) == str(token)  # the actual token comes first
        assert k <= len(position) <= k + 1
        for entry in position.values():
            assert entry["logprob"] <= 0 and entry["rank"] >= 1
            assert set(entry) == {"logprob", "rank", "decoded_token"}
        # the top k hold ranks 1..k; the actual token is one of them or comes extra
        assert sorted(v["rank"] for v in position.values())[:k] == list(range(1, k + 1))


def test_it_returns_full_vocabulary_prompt_logprobs(client: httpx.Client) -> None:
    ids = tokenize(client, "One two three")
    body = complete(client, prompt=ids, max_tokens=1, prompt_logprobs=-1)
    plp = body["choices"][0]["prompt_logprobs"]
    assert len(plp) == len(ids) and plp[0] is None
    for position in plp[1:]:
        assert len(position) == len(plp[1]) > 100
        assert math.isclose(sum(math.exp(v["logprob"]) for v in position.values()), 1, rel_tol=1e-3)
        assert min(v["rank"] for v in position.values()) == 1


def test_it_echoes_the_prompt(client: httpx.Client) -> None:
    ids = tokenize(client, PROMPT)
    body = complete(client, prompt=PROMPT, max_tokens=3, echo=True, logprobs=1, prompt_logprobs=1)
    [choice] = body["choices"]
    assert choice["text"].startswith(PROMPT)
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(ids) + body["usage"]["completion_tokens"]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    # the echoed prompt positions carry the same numbers as prompt_logprobs
    for i in range(1, len(ids)):
        assert lp["token_logprobs"][i] == choice["prompt_logprobs"][i][str(ids[i])]["logprob"]


def test_it_takes_token_id_prompts(client: httpx.Client) -> None:
    ids = tokenize(client, PROMPT)
    by_text = complete(client, prompt=PROMPT, max_tokens=4, temperature=0)
    by_ids = complete(client, prompt=ids, max_tokens=4, temperature=0)
    assert by_ids["choices"][0]["text"] == by_text["choices"][0]["text"]
    assert by_ids["usage"]["prompt_tokens"] == len(ids)
    batch = complete(client, prompt=[ids, ids[:2]], max_tokens=2, temperature=0)
    assert [c["index"] for c in batch["choices"]] == [0, 1]
    assert batch["usage"]["prompt_tokens"] == len(ids) + 2


def test_it_samples_from_an_empty_prompt(client: httpx.Client) -> None:
    body = complete(client, prompt="", max_tokens=2)
    assert body["usage"]["prompt_tokens"] == 1  # just the BOS token


def test_it_tokenizes(client: httpx.Client) -> None:
    r = client.post("/tokenize", json={"model": card(client)["id"], "prompt": PROMPT})
    body = r.json()
    assert body["count"] == len(body["tokens"]) > 0
    assert body["max_model_len"] == card(client)["max_model_len"]


def _bad_requests(client: httpx.Client) -> list[tuple[dict[str, Any], str, str]]:
    """(body, expected error.code, a word the message must contain)."""
    m = card(client)
    too_long = [5] * 1025
    return [
        ({"prompt": "x", "max_tokens": 1, "bogus": 1}, "invalid_request", "bogus"),
        (
            {"prompt": "x", "max_tokens": 1, "extra_body": {"top_k": 2}},
            "invalid_request",
            "extra_body",
        ),
        ({"prompt": "x", "max_tokens": "16"}, "invalid_request", "max_tokens"),
        ({"prompt": "x", "max_tokens": 1, "logprobs": True}, "invalid_request", "logprobs"),
        ({"prompt": "x", "max_tokens": 1, "stream": "true"}, "invalid_request", "stream"),
        ({"prompt": "x", "max_tokens": 1, "temperature": 200}, "invalid_request", "temperature"),
        ({"prompt": "x", "max_tokens": 1, "top_p": 0}, "invalid_request", "top_p"),
        ({"prompt": "x", "max_tokens": 1, "top_k": 0}, "invalid_request", "top_k"),
        ({"prompt": "x", "max_tokens": 1, "n": 17}, "invalid_request", "n"),
        ({"prompt": "x", "max_tokens": 1, "seed": 2**63}, "invalid_request", "seed"),
        ({"prompt": "x", "max_tokens": 1, "stop": list("abcde")}, "invalid_request", "stop"),
        ({"prompt": "x", "max_tokens": 1, "logprobs": 21}, "invalid_request", "logprobs"),
        ({"prompt": "x", "max_tokens": 1, "logprobs": -1}, "invalid_request", "logprobs"),
        ({"prompt": [1, "two"], "max_tokens": 1}, "invalid_request", "prompt"),
        ({"prompt": [], "max_tokens": 1}, "invalid_request", "prompt"),
        ({"prompt": [[]], "max_tokens": 1}, "invalid_request", "prompt"),
        ({"prompt": [[1], []], "max_tokens": 1}, "invalid_request", "prompt"),
        ({"prompt": [10**9], "max_tokens": 1}, "invalid_request", "vocabulary"),
        ({"max_tokens": 1}, "invalid_request", "prompt"),
        ({"prompt": "", "max_tokens": 1, "add_special_tokens": False}, "invalid_request", "prompt"),
        ({"prompt": "x", "n": 2}, "invalid_request", "max_tokens"),
        ({"prompt": ["x"] * 3, "n": 16, "max_tokens": 700}, "invalid_request", "32,000"),
        (
            {"prompt": "x", "max_tokens": m["max_model_len"]},
            "context_length_exceeded",
            "max_tokens",
        ),
        (
            {"prompt": too_long, "max_tokens": 1, "prompt_logprobs": -1},
            "full_vocab_prompt_too_long",
            "1024",
        ),
        (
            {"prompt": "x", "max_tokens": 1, "stream": True, "prompt_logprobs": 1},
            "invalid_request",
            "prompt_logprobs",
        ),
        (
            {"prompt": "x", "max_tokens": 1, "stream_options": {"include_usage": True}},
            "invalid_request",
            "stream_options",
        ),
        (
            {"prompt": "x", "max_tokens": 1, "stream": True, "stream_options": {"foo": True}},
            "invalid_request",
            "foo",
        ),
        ({"prompt": "x", "max_tokens": 1, "model": m["root"]}, "model_not_found", "model"),
    ]


def test_it_rejects_invalid_requests(client: httpx.Client) -> None:
    for body, code, word in _bad_requests(client):
        r = client.post("/v1/completions", json=body)
        assert r.status_code == 400, body
        error = r.json()["error"]
        assert error["code"] == code, (body, error)
        assert word in error["message"], (body, error)
        assert error["type"] == "invalid_request_error"
        assert r.json()["request_id"] == r.headers["x-request-id"]


def test_it_refuses_chat_completions(client: httpx.Client) -> None:
    r = client.post("/v1/chat/completions", json={"messages": []})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "chat_completions_unsupported"


def test_it_accepts_prompt_logprobs_zero_with_stream(client: httpx.Client) -> None:
    events = stream(client, prompt=PROMPT, max_tokens=2, prompt_logprobs=0)
    assert events[-1] == "[DONE]"
