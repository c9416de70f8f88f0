import pytest

from completions.schema import FieldError, ParamsInvalid, validate_params


def test_it_reports_every_bad_field_once():
    with pytest.raises(ParamsInvalid) as caught:
        validate_params({"prompt": "x", "temperature": 200, "top_p": 0, "logprobs": True, "x": 1})
    errors = caught.value.errors
    assert all(isinstance(e, FieldError) for e in errors)
    assert {e.field: e.code for e in errors} == {
        "temperature": "out_of_range",
        "top_p": "out_of_range",
        "logprobs": "invalid_type",
        "x": "unknown_field",
    }
    assert set(caught.value.by_field()) == {"temperature", "top_p", "logprobs", "x"}


def test_it_gives_the_seeds_400_envelope():
    with pytest.raises(ParamsInvalid) as caught:
        validate_params({"prompt": "x", "max_tokens": "16"})
    body = caught.value.as_envelope(request_id="req-1")
    assert body["request_id"] == "req-1"
    assert body["error"]["code"] == "invalid_request"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["param"] == "max_tokens"
    assert body["error"]["errors"] == [
        {"code": "invalid_type", "field": "max_tokens", "message": "must be a valid integer"}
    ]


def test_it_computes_prompt_count_and_worst_case():
    params = validate_params({"prompt": [[1, 2], [3]], "n": 3, "max_tokens": 7})
    assert params.prompt_count == 2
    assert params.worst_case_output == 2 * 3 * 7
    assert validate_params({"prompt": [1, 2, 3]}).prompt_count == 1
    assert validate_params({"prompt": "abc", "max_tokens": 5}).to_body() == {
        "prompt": "abc",
        "max_tokens": 5,
    }
