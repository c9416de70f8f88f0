"""The seed's openai-SDK example, unchanged, against Weft with ACS_API_BASE / ACS_API_KEY
set; errors carry their code as e.code; chat is refused as the seed says."""

import os

import openai
import pytest

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(proxy, api_key, monkeypatch):
    base, _ = proxy
    monkeypatch.setenv("ACS_API_BASE", base)
    monkeypatch.setenv("ACS_API_KEY", api_key())
    # As a user would build it from the two variables.
    return openai.OpenAI(base_url=os.environ["ACS_API_BASE"], api_key=os.environ["ACS_API_KEY"])


def test_it_serves_the_seed_example_with_extra_body(client, proxy):
    _, backend = proxy
    resp = client.completions.create(
        model="llama-8b",
        prompt="The capital of France is",
        max_tokens=1,
        temperature=0.7,  # standard kwarg
        logprobs=5,  # standard kwarg
        extra_body={  # vLLM-native — must go here
            "top_k": 20,
            "min_p": 0.05,
            "repetition_penalty": 1.1,
            "prompt_logprobs": 5,
        },
    )
    assert resp.model == "weft/scripted-tiny"
    [choice] = resp.choices
    assert len(choice.logprobs.top_logprobs[0]) >= 5
    assert choice.model_extra["prompt_logprobs"][0] is None
    assert resp.usage.completion_tokens == 1
    sent = backend.requests()[-1]["body"]
    assert "extra_body" not in sent and sent["top_k"] == 20


def test_it_takes_token_ids_and_streams(client):
    resp = client.completions.create(model="llama-8b", prompt=[1, 2, 3, 4, 5], max_tokens=8)
    assert resp.usage.prompt_tokens == 5
    chunks = list(
        client.completions.create(
            model="llama-8b", prompt="Once upon a time", max_tokens=6, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert 1 <= len(texts) <= 6
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(texts)


def test_it_exposes_the_error_code(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="llama-8b", prompt="x", max_tokens=1, temperature=200)
    assert caught.value.code == "invalid_request"
    assert caught.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="no-such-model", prompt="x", max_tokens=1)
    assert caught.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="llama-8b", messages=[{"role": "user", "content": "hello"}]
        )
    assert caught.value.code == "chat_completions_unsupported"


def test_it_lists_the_models(client):
    [model] = [m for m in client.models.list() if m.id == "llama-8b"]
    assert model.model_extra["root"] == "weft/scripted-tiny"
    assert model.model_extra["default"] is True
    assert model.model_extra["capabilities"] == {
        "max_logprobs": 20,
        "full_vocab_max_prompt_tokens": 1024,
    }
