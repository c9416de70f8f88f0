"""Each error status of the scripted backend becomes its typed error, carrying the
code, the request id and (for retryable ones) Retry-After."""

import pytest

from completions.client import BackendClient
from completions.errors import (
    BackendUnavailable,
    BudgetExceeded,
    InvalidRequest,
    ModelNotFound,
    QueueFull,
    RateLimited,
    UpstreamError,
    UpstreamTimeout,
)
from completions.schema import validate_params

pytestmark = pytest.mark.django_db

PARAMS = {"model": "scripted", "prompt": "Once upon a time", "max_tokens": 4}

CASES = [
    # fault, expected class, code, attempts (1 + retries with max_retries=2)
    ({"status": 429, "code": "budget_exceeded"}, BudgetExceeded, "budget_exceeded", 1),
    ({"status": 429, "code": "queue_full", "retry_after": 0}, QueueFull, "queue_full", 3),
    ({"status": 429, "code": "rate_limited", "retry_after": 0}, RateLimited, "rate_limited", 3),
    ({"status": 500}, UpstreamError, "internal_error", 1),
    ({"status": 502, "retry_after": 0}, UpstreamError, "upstream_error", 3),
    ({"status": 503, "retry_after": 0}, BackendUnavailable, "upstream_unavailable", 3),
    ({"status": 504}, UpstreamTimeout, "upstream_deadline", 1),
]


@pytest.mark.parametrize(("fault", "cls", "code", "attempts"), CASES, ids=lambda v: str(v)[:40])
@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
def test_it_raises_the_typed_error(scripted, fault, cls, code, attempts, streaming):
    scripted.faults(*[fault] * 3)
    params = validate_params({**PARAMS, "stream": streaming})
    with BackendClient("batch", max_retries=2) as client, pytest.raises(cls) as caught:
        if streaming:
            with client.stream(params) as chunks:
                list(chunks)
        else:
            client.complete(params)
    error = caught.value
    assert error.code == code
    assert error.status == fault["status"]
    assert error.request_id.startswith("req-")
    assert len(scripted.requests()) == attempts
    if fault["status"] == 504:
        assert error.retry_after is None and error.should_retry is False


def test_it_maps_400s_from_the_backend(scripted):
    with BackendClient(max_retries=2) as client:
        with pytest.raises(ModelNotFound) as caught:
            client.complete(validate_params({**PARAMS, "model": "no-such-model"}))
        assert caught.value.status == 400
        with pytest.raises(InvalidRequest) as caught:
            # Valid for the seed, too long for this engine's context window.
            client.complete(validate_params({**PARAMS, "prompt": [1] * 5000}))
        assert caught.value.status == 400
    assert len(scripted.requests()) == 2  # never retried
