"""schemathesis against the live /openapi.json: the real ASGI server (the /v1 proxy)
in front of the scripted engine; for every operation, bounded positive and negative
examples (hypothesis, derandomized so a failure reproduces). Every response must be
no server error and match the spec: status, content type, headers, body schema, and
invalid input refused. Path and query parameters are generated too: a harvest id that
is not a job id's shape (the spec's pattern) and a `wait` out of range are refused (404,
400) in the envelope; tests/api/test_it_refuses_odd_paths_and_queries_in_the_envelope.py
sends what schemathesis does not (NUL, lone surrogates, 10 kB values).

schemathesis' own pytest plugin does not work with pytest 9 (it sets Function._nodeid),
so the strategies are driven with hypothesis directly."""

import time

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

pytestmark = pytest.mark.django_db(transaction=True)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
EXAMPLES = 50  # per operation and mode: ~350 requests, under a key's 600 a minute


def examples(operation, mode: GenerationMode, headers: dict, statuses: set[int]):
    """A hypothesis test sending bounded examples of one operation in one mode."""

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case) -> None:
        response = case.call_and_validate(headers=headers, checks=CHECKS, timeout=30)
        statuses.add(response.status_code)

    return check


def test_it_answers_inside_the_spec(proxy_web, api_key):
    schema = schemathesis.openapi.from_url(f"{proxy_web}/openapi.json")
    headers = {"Authorization": f"Bearer {api_key(budget=50_000_000)}"}
    started = time.monotonic()
    ran: list[str] = []
    seen: dict[str, set[int]] = {}
    by_mode: dict[tuple[str, str], set[int]] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        statuses = seen.setdefault(operation.label, set())
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            answered = by_mode.setdefault((operation.label, mode.value), set())
            try:
                examples(operation, mode, headers, answered)()
                statuses |= answered
            except Unsatisfiable:
                # Nothing to make invalid (no body, no typed parameter): e.g. GET /health.
                assert mode is GenerationMode.NEGATIVE, operation.label
                continue
            ran.append(f"{operation.label} {mode.value}")
    assert {r.split()[1] for r in ran} == {
        "/v1/completions",
        "/v1/models",
        "/v1/chat/completions",
        "/v1/harvest/{id}",
        "/health",
        "/health/ready",
    }
    assert "POST /v1/completions negative" in ran
    # The run reached the backend and the validator both.
    assert {200, 400} <= seen["POST /v1/completions"], seen
    assert 200 in seen["GET /v1/models"] and 400 in seen["POST /v1/chat/completions"]
    # Jobs: accepted (Prefer: respond-async), and harvests of ids that are no job.
    assert 202 in seen["POST /v1/completions"], seen
    assert {400, 404} <= seen["GET /v1/harvest/{id}"] and 404 in seen["DELETE /v1/harvest/{id}"]
    # Ids of another shape, bad waits (and mangled keys): refused, never a 5xx or a 2xx.
    assert by_mode[("GET /v1/harvest/{id}", "negative")] <= {400, 401, 404}
    assert by_mode[("DELETE /v1/harvest/{id}", "negative")] <= {400, 401, 404}
    print(f"\nschemathesis: {ran}, statuses {seen} in {time.monotonic() - started:.1f} s")
