"""Table-driven: every rule of the seed's request body, with accepted and rejected
values. Each rejection names the field and a machine-readable code."""

import pytest

from completions.schema import ModelInfo, ParamsInvalid, validate_params

MODEL = ModelInfo(id="m", max_logprobs=20, full_vocab_max_prompt_tokens=1024)
BASE = {"model": "m", "prompt": "The capital of France is"}

ACCEPTED = [
    # types: a JSON integer where a float is expected
    {"temperature": 1},
    {"temperature": 0.0},
    {"temperature": 100},
    {"top_p": 1e-9},
    {"top_p": 1},
    {"top_k": -1},
    {"top_k": 1},
    {"top_k": 50_000},
    {"min_p": 0},
    {"min_p": 1.0},
    {"presence_penalty": -2},
    {"presence_penalty": 2.0},
    {"frequency_penalty": -2.0},
    {"frequency_penalty": 2},
    {"repetition_penalty": 0.01},
    {"repetition_penalty": 2},
    {"seed": 0},
    {"seed": 2**63 - 1},
    {"n": 1},
    {"n": 16, "max_tokens": 2000},
    {"max_tokens": 1},
    {"max_tokens": 32_000},
    {"logprobs": 0},
    {"logprobs": 20},
    {"prompt_logprobs": -1},
    {"prompt_logprobs": 0},
    {"prompt_logprobs": 20},
    {"stop": "\n"},
    {"stop": ["a", "b", "c", "d"]},
    {"stop": []},
    {"echo": True},
    {"stream": False},
    {"add_special_tokens": False},
    {"user": "tag"},
    # prompt forms
    {"prompt": ""},
    {"prompt": ["a", "b"], "max_tokens": 10},
    {"prompt": [1, 2, 3]},
    {"prompt": [[1, 2], [3]], "max_tokens": 10},
    # output-work cap, exactly at the limit
    {"prompt": ["a", "b"], "n": 4, "max_tokens": 4000},
    # streaming rules
    {"stream": True, "prompt_logprobs": 0},
    {"stream": True, "stream_options": {"include_usage": True}},
    {"stream": True, "stream_options": {"continuous_usage_stats": False}},
    {"stream": True, "stream_options": {}},
    # full vocabulary within the model's prompt cap
    {"prompt": list(range(1024)), "prompt_logprobs": -1},
]

REJECTED = [
    # (changes, field, code)
    ({"temperature": True}, "temperature", "invalid_type"),
    ({"temperature": "1"}, "temperature", "invalid_type"),
    ({"temperature": 200}, "temperature", "out_of_range"),
    ({"temperature": -0.1}, "temperature", "out_of_range"),
    ({"temperature": float("nan")}, "temperature", "out_of_range"),
    ({"top_p": 0.0}, "top_p", "out_of_range"),
    ({"top_p": 1.01}, "top_p", "out_of_range"),
    ({"top_p": False}, "top_p", "invalid_type"),
    ({"top_k": 0}, "top_k", "out_of_range"),
    ({"top_k": -2}, "top_k", "out_of_range"),
    ({"top_k": 1.0}, "top_k", "invalid_type"),
    ({"top_k": True}, "top_k", "invalid_type"),
    ({"min_p": -0.01}, "min_p", "out_of_range"),
    ({"min_p": 1.5}, "min_p", "out_of_range"),
    ({"min_p": "0"}, "min_p", "invalid_type"),
    ({"presence_penalty": 2.5}, "presence_penalty", "out_of_range"),
    ({"presence_penalty": -3}, "presence_penalty", "out_of_range"),
    ({"frequency_penalty": 2.01}, "frequency_penalty", "out_of_range"),
    ({"frequency_penalty": True}, "frequency_penalty", "invalid_type"),
    ({"repetition_penalty": 0}, "repetition_penalty", "out_of_range"),
    ({"repetition_penalty": 2.1}, "repetition_penalty", "out_of_range"),
    ({"seed": -1}, "seed", "out_of_range"),
    ({"seed": 2**63}, "seed", "out_of_range"),
    ({"seed": "1"}, "seed", "invalid_type"),
    ({"seed": True}, "seed", "invalid_type"),
    ({"n": 0}, "n", "out_of_range"),
    ({"n": 17, "max_tokens": 1}, "n", "out_of_range"),
    ({"n": 2.0, "max_tokens": 1}, "n", "invalid_type"),
    ({"max_tokens": 0}, "max_tokens", "out_of_range"),
    ({"max_tokens": 1_000_001}, "max_tokens", "out_of_range"),
    ({"max_tokens": "16"}, "max_tokens", "invalid_type"),
    ({"max_tokens": 16.0}, "max_tokens", "invalid_type"),
    ({"max_tokens": True}, "max_tokens", "invalid_type"),
    ({"logprobs": True}, "logprobs", "invalid_type"),
    ({"logprobs": -1}, "logprobs", "out_of_range"),
    ({"logprobs": 21}, "logprobs", "out_of_range"),  # above the model's max_logprobs
    ({"logprobs": 101}, "logprobs", "out_of_range"),
    ({"prompt_logprobs": -2}, "prompt_logprobs", "out_of_range"),
    ({"prompt_logprobs": 21}, "prompt_logprobs", "out_of_range"),
    ({"prompt_logprobs": "5"}, "prompt_logprobs", "invalid_type"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "too_many"),
    ({"stop": [1]}, "stop", "invalid_type"),
    ({"stop": 5}, "stop", "invalid_type"),
    ({"echo": "true"}, "echo", "invalid_type"),
    ({"echo": 1}, "echo", "invalid_type"),
    ({"stream": "true"}, "stream", "invalid_type"),
    ({"stream": 0}, "stream", "invalid_type"),
    ({"add_special_tokens": "false"}, "add_special_tokens", "invalid_type"),
    ({"user": 5}, "user", "invalid_type"),
    ({"model": 5}, "model", "invalid_type"),
    # prompt forms
    ({"prompt": [1, "two"]}, "prompt", "invalid_type"),
    ({"prompt": []}, "prompt", "empty_prompt"),
    ({"prompt": [[]]}, "prompt", "empty_prompt"),
    ({"prompt": [[1, 2], []], "max_tokens": 5}, "prompt", "empty_prompt"),
    ({"prompt": [True]}, "prompt", "invalid_type"),
    ({"prompt": {"text": "x"}}, "prompt", "invalid_type"),
    ({"prompt": None}, "prompt", "invalid_type"),
    # max_tokens required for batches and n > 1; the output-work cap
    ({"n": 2}, "max_tokens", "required"),
    ({"prompt": ["a", "b"]}, "max_tokens", "required"),
    ({"prompt": [[1], [2]]}, "max_tokens", "required"),
    ({"max_tokens": 32_001}, "max_tokens", "output_work_exceeded"),
    ({"prompt": ["a", "b"], "n": 4, "max_tokens": 4001}, "max_tokens", "output_work_exceeded"),
    # streaming rules
    ({"stream": True, "prompt_logprobs": 5}, "prompt_logprobs", "incompatible_with_stream"),
    ({"stream": True, "prompt_logprobs": -1}, "prompt_logprobs", "incompatible_with_stream"),
    ({"stream_options": {"include_usage": True}}, "stream_options", "requires_stream"),
    ({"stream": False, "stream_options": {}}, "stream_options", "requires_stream"),
    ({"stream": True, "stream_options": {"foo": True}}, "stream_options.foo", "unknown_field"),
    (
        {"stream": True, "stream_options": {"include_usage": "yes"}},
        "stream_options.include_usage",
        "invalid_type",
    ),
    ({"stream": True, "stream_options": []}, "stream_options", "invalid_type"),
    # full vocabulary beyond the model's cap
    (
        {"prompt": list(range(1025)), "prompt_logprobs": -1},
        "prompt_logprobs",
        "full_vocab_prompt_too_long",
    ),
    # unknown fields, including the SDK-only extra_body
    ({"extra_body": {"top_k": 5}}, "extra_body", "unknown_field"),
    ({"best_of": 2}, "best_of", "unknown_field"),
]


@pytest.mark.parametrize("changes", ACCEPTED, ids=repr)
def test_it_accepts(changes):
    params = validate_params({**BASE, **changes}, model=MODEL)
    body = params.to_body()
    for key, value in changes.items():
        if key == "stream_options":
            assert body.get(key, {}) == value
        else:
            assert body[key] == value


@pytest.mark.parametrize(("changes", "field", "code"), REJECTED, ids=lambda v: repr(v)[:60])
def test_it_rejects(changes, field, code):
    with pytest.raises(ParamsInvalid) as caught:
        validate_params({**BASE, **changes}, model=MODEL)
    assert [(e.field, e.code) for e in caught.value.errors] == [(field, code)]
    assert caught.value.errors[0].message


def test_it_requires_a_prompt():
    with pytest.raises(ParamsInvalid) as caught:
        validate_params({"model": "m"})
    assert [(e.field, e.code) for e in caught.value.errors] == [("prompt", "required")]


def test_it_checks_full_vocab_length_of_text_prompts_when_counts_are_known():
    data = {**BASE, "prompt_logprobs": -1}
    validate_params(data, model=MODEL, prompt_tokens=[1024])
    with pytest.raises(ParamsInvalid) as caught:
        validate_params(data, model=MODEL, prompt_tokens=[1025])
    assert caught.value.errors[0].code == "full_vocab_prompt_too_long"


def test_it_allows_up_to_100_logprobs_without_a_model():
    assert validate_params({**BASE, "logprobs": 100}).logprobs == 100
