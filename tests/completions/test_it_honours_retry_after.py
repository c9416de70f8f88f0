import time

import pytest

from completions.client import BackendClient
from completions.errors import BackendUnavailable
from completions.schema import validate_params

pytestmark = pytest.mark.django_db

PARAMS = validate_params({"model": "scripted", "prompt": "Hello", "max_tokens": 3})


def test_it_waits_retry_after_then_succeeds(scripted):
    scripted.faults(
        {"status": 503, "retry_after": 1}, {"status": 429, "code": "queue_full", "retry_after": 1}
    )
    started = time.monotonic()
    with BackendClient(max_retries=3) as client:
        result = client.complete(PARAMS)
    elapsed = time.monotonic() - started
    assert result.body["choices"][0]["text"]
    sent = [r["time"] for r in scripted.requests()]
    assert len(sent) == 3
    assert sent[1] - sent[0] >= 0.95 and sent[2] - sent[1] >= 0.95
    assert elapsed >= 1.9


def test_it_gives_up_when_retry_after_is_longer_than_it_may_wait(scripted):
    scripted.faults({"status": 503, "retry_after": 60})
    started = time.monotonic()
    with (
        BackendClient(max_retries=3, max_retry_wait=5) as client,
        pytest.raises(BackendUnavailable) as caught,
    ):
        client.complete(PARAMS)
    assert caught.value.retry_after == 60
    assert time.monotonic() - started < 5
    assert len(scripted.requests()) == 1


def test_it_never_retries_a_504(scripted):
    scripted.faults({"status": 504}, {"status": 504})
    with BackendClient(max_retries=3) as client, pytest.raises(Exception) as caught:
        client.complete(PARAMS)
    assert caught.value.code == "upstream_deadline"
    assert len(scripted.requests()) == 1
