"""Every operation lists every error status it can return, from api.errors' table,
with the error envelope (error.code an enum of that status' codes) and the headers
that go with them; the security scheme is bearer, /health needs none."""

import pytest

from api.errors import ERRORS
from api.openapi import OPERATIONS

pytestmark = pytest.mark.django_db


@pytest.fixture
def spec(client):
    return client.get("/openapi.json").json()


def resolve(spec: dict, header: dict) -> dict:
    if "$ref" in header:
        return spec["components"]["headers"][header["$ref"].rsplit("/", 1)[1]]
    return header


def test_it_lists_each_operations_codes_under_their_statuses(spec):
    for (path, method), op in OPERATIONS.items():
        responses = spec["paths"][path][method]["responses"]
        for code in op["errors"]:
            status = str(ERRORS[code].status)
            assert status in responses, (path, code)
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema["allOf"][0] == {"$ref": "#/components/schemas/ErrorEnvelope"}
            assert code in schema["allOf"][1]["properties"]["error"]["properties"]["code"]["enum"]
            assert f"`{code}`" in responses[status]["description"]
            example = responses[status]["content"]["application/json"]["examples"][code]["value"]
            assert example["error"]["type"] == ERRORS[code].type
        statuses = {str(ERRORS[c].status) for c in op["errors"]}
        assert set(responses) - {"200", "202"} == statuses  # 202: a completion job


def test_it_names_the_completions_statuses_the_seed_lists(spec):
    responses = spec["paths"]["/v1/completions"]["post"]["responses"]
    assert {"200", "400", "401", "413", "429", "500", "502", "503", "504"} <= set(responses)
    chat = spec["paths"]["/v1/chat/completions"]["post"]["responses"]["400"]
    assert "chat_completions_unsupported" in chat["description"]


def test_it_attaches_the_retry_and_trace_headers(spec):
    completions = spec["paths"]["/v1/completions"]["post"]["responses"]
    for status, response in completions.items():
        assert response["headers"]["X-Request-Id"]["required"] is True, status
    for status in ("429", "502", "503"):
        assert completions[status]["headers"]["Retry-After"]["required"] is True
    for status in ("504", "413"):
        assert completions[status]["headers"]["X-Should-Retry"]["required"] is True
        assert resolve(spec, completions[status]["headers"]["X-Should-Retry"])["schema"][
            "enum"
        ] == ["false"]
    # Only deadline_infeasible among the 400s carries X-Should-Retry: listed, not required.
    assert "required" not in resolve(spec, completions["400"]["headers"]["X-Should-Retry"])
    assert "Retry-After" not in completions["504"]["headers"]
    for status in ("502", "503", "504"):
        assert {"X-Acs-Upstream-Model", "X-Acs-Upstream-Gpu"} <= set(completions[status]["headers"])
    for status in ("502", "504"):
        assert completions[status]["headers"]["X-Acs-Upstream-Error-Kind"]["required"] is True
    # 503 is also service_unavailable (Weft's own database or Redis away): not upstream.
    kind = resolve(spec, completions["503"]["headers"]["X-Acs-Upstream-Error-Kind"])
    assert "required" not in kind
    ok = completions["200"]["headers"]
    assert {"X-Acs-Upstream-Model", "X-Acs-Upstream-Gpu", "X-Acs-Max-Tokens-Clamped"} <= set(ok)
    clamped = resolve(spec, ok["X-Acs-Max-Tokens-Clamped"])["schema"]["pattern"]
    import re

    assert re.match(clamped, "requested=32000,applied=512,reason=deadline+budget,source=default")
    assert not re.match(clamped, "requested=5,applied=4,reason=other,source=client")
    assert set(completions["200"]["content"]) == {"application/json", "text/event-stream"}


def test_it_declares_bearer_security_and_a_public_health(spec):
    assert spec["components"]["securitySchemes"]["bearer"] == {
        **spec["components"]["securitySchemes"]["bearer"], "type": "http", "scheme": "bearer"
    }  # fmt: skip
    assert spec["security"] == [{"bearer": []}]
    assert spec["paths"]["/health"]["get"]["security"] == []
    assert set(spec["paths"]["/health"]["get"]["responses"]) == {"200"}  # liveness
    assert spec["paths"]["/health/ready"]["get"]["security"] == []
    assert set(spec["paths"]["/health/ready"]["get"]["responses"]) == {"200", "503"}
    workload = spec["paths"]["/v1/completions"]["post"]["parameters"][0]
    assert workload["name"] == "X-Acs-Workload" and workload["in"] == "header"


def test_it_knows_every_code_it_lists():
    for op in OPERATIONS.values():
        assert set(op["errors"]) <= set(ERRORS)
    listed = {c for op in OPERATIONS.values() for c in op["errors"]}
    # Every code the API can answer is documented on some operation, except the
    # route-level ones (unknown route, wrong method): the spec's description names those.
    assert set(ERRORS) - listed <= {"not_found", "method_not_allowed"}


def test_it_describes_the_route_level_errors(spec):
    text = spec["info"]["description"]
    assert "404 `not_found`" in text and "405 `method_not_allowed`" in text
