"""GET /openapi.json (public): a valid OpenAPI 3.1 document whose request schema is
the validating pydantic model's own, so it states every bound the server enforces."""

import pytest
from openapi_spec_validator import validate

from completions.schema import FIELDS, MAX_SEED, ParamsInvalid, validate_params

pytestmark = pytest.mark.django_db


@pytest.fixture
def spec(client):
    response = client.get("/openapi.json")  # no login: public, like /health and the seed's
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    return response.json()


def branch(prop: dict) -> dict:
    """The non-null member of a nullable property."""
    members = [m for m in prop.get("anyOf", [prop]) if m.get("type") != "null"]
    assert len(members) == 1, prop
    return members[0]


def test_it_is_a_valid_openapi_document(spec):
    validate(spec)
    assert spec["openapi"].startswith("3.1")
    assert spec["servers"] == [{"url": "http://testserver"}]
    assert set(spec["paths"]) == {
        "/v1/completions",
        "/v1/models",
        "/v1/chat/completions",
        "/v1/harvest/{id}",
        "/health",
        "/health/ready",
    }


def test_it_states_every_bound(spec):
    body = spec["components"]["schemas"]["CompletionRequest"]
    props = body["properties"]
    assert set(props) == set(FIELDS) and body["additionalProperties"] is False
    assert body["required"] == ["prompt"]
    assert branch(props["seed"]) == {"type": "integer", "minimum": 0, "maximum": MAX_SEED}
    assert MAX_SEED == 2**63 - 1
    assert branch(props["temperature"]) == {"type": "number", "minimum": 0, "maximum": 100}
    assert branch(props["top_p"]) == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    assert branch(props["repetition_penalty"]) == {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 2,
    }
    assert branch(props["min_p"]) == {"type": "number", "minimum": 0, "maximum": 1}
    for name in ("presence_penalty", "frequency_penalty"):
        assert branch(props[name]) == {"type": "number", "minimum": -2, "maximum": 2}
    assert branch(props["max_tokens"]) == {"type": "integer", "minimum": 1, "maximum": 1_000_000}
    assert branch(props["n"]) == {"type": "integer", "minimum": 1, "maximum": 16}
    assert branch(props["logprobs"]) == {"type": "integer", "minimum": 0, "maximum": 100}
    assert branch(props["prompt_logprobs"]) == {"type": "integer", "minimum": -1, "maximum": 100}
    stop = [m for m in props["stop"]["anyOf"] if m.get("type") == "array"]
    assert stop == [{"type": "array", "items": {"type": "string"}, "maxItems": 4}]
    top_k = [m for m in props["top_k"]["anyOf"] if m.get("type") != "null"]
    assert top_k == [{"type": "integer", "const": -1}, {"type": "integer", "minimum": 1}]
    for name in ("echo", "stream", "add_special_tokens"):
        assert branch(props[name]) == {"type": "boolean"}
    prompt = props["prompt"]["anyOf"]
    assert {"type": "string"} in prompt and all(p.get("minItems") == 1 for p in prompt[1:])
    options = spec["components"]["schemas"]["StreamOptions"]
    assert options["additionalProperties"] is False
    assert set(options["properties"]) == {"include_usage", "continuous_usage_stats"}
    assert "32,000" in props["max_tokens"]["description"]


def test_it_changed_no_validation_rule_while_describing_them():
    # The spec-only overrides (top_k, prompt) leave the validators in charge.
    for bad in ({"prompt": "x", "top_k": 0}, {"prompt": []}, {"prompt": [[1], []]}):
        with pytest.raises(ParamsInvalid):
            validate_params(bad)
    assert validate_params({"prompt": [[1], [2]], "top_k": -1, "max_tokens": 1}).top_k == -1
