"""A stream the backend refuses with a retryable 429 before any byte of it is retried
(the seed's policy), and every choice of the retried stream arrives."""

import pytest

from completions.client import BackendClient
from completions.errors import RateLimited
from completions.schema import validate_params

pytestmark = pytest.mark.django_db


def test_it_retries_then_streams_every_choice(scripted):
    scripted.faults({"status": 429, "code": "rate_limited", "retry_after": 0})
    params = validate_params(
        {"model": "scripted", "prompt": "Hi", "max_tokens": 4, "stream": True, "n": 2}
    )
    with BackendClient() as client, client.stream(params) as chunks:
        got = [(c["index"], c["text"]) for chunk in chunks for c in chunk["choices"]]
    assert sorted({i for i, _ in got}) == [0, 1]
    assert len(got) == 8
    assert len(scripted.requests()) == 2


def test_it_raises_the_typed_error_when_it_may_not_retry(scripted):
    scripted.faults({"status": 429, "code": "rate_limited", "retry_after": 0})
    params = validate_params({"model": "scripted", "prompt": "Hi", "max_tokens": 4, "stream": True})
    with BackendClient(max_retries=0) as client, pytest.raises(RateLimited):  # noqa: SIM117
        with client.stream(params):
            pass
    assert len(scripted.requests()) == 1
