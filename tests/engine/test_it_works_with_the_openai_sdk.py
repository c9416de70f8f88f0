"""The official openai SDK against the engine, with the seed's examples."""

from __future__ import annotations

import openai
import pytest

pytestmark = pytest.mark.slow  # the real model


@pytest.fixture
def sdk(llama_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=llama_url + "/v1", api_key="unused", max_retries=0)


def test_it_serves_the_seed_example_with_extra_body(sdk: openai.OpenAI) -> None:
    resp = sdk.completions.create(
        model="smollm2-135m",
        prompt="The capital of France is",
        max_tokens=1,
        temperature=0.7,
        logprobs=5,
        extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "prompt_logprobs": 5},
    )
    assert resp.model == "HuggingFaceTB/SmolLM2-135M-Instruct"
    [choice] = resp.choices
    assert choice.logprobs is not None and len(choice.logprobs.top_logprobs[0]) in (5, 6)
    prompt_logprobs = choice.model_extra["prompt_logprobs"]
    assert prompt_logprobs[0] is None and len(prompt_logprobs) == resp.usage.prompt_tokens
    assert resp.usage.completion_tokens == 1


def test_it_takes_token_ids_and_streams(sdk: openai.OpenAI) -> None:
    resp = sdk.completions.create(model="smollm2-135m", prompt=[504, 3575, 282], max_tokens=4)
    assert resp.usage.prompt_tokens == 3
    chunks = list(
        sdk.completions.create(
            model="smollm2-135m",
            prompt="Once upon a time",
            max_tokens=4,
            seed=1,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4
    again = sdk.completions.create(
        model="smollm2-135m", prompt="Once upon a time", max_tokens=4, seed=1
    )
    assert again.choices[0].text == text


def test_it_raises_typed_errors(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        sdk.completions.create(model="llama-405b", prompt="x", max_tokens=1)
    assert info.value.code == "model_not_found"
