"""A client that goes away cancels the upstream request at once (the engine is free for
the next request) and is charged only what it was sent — or, for a JSON answer that
never arrived, no more than the backend can have generated meanwhile."""

import time

import httpx
import pytest
import redis
from django.conf import settings

from api.limits import active_key
from api.models import ApiRequest
from completions.models import BudgetMonth
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_stops_the_backend_and_charges_what_was_sent(proxy, make_key):
    base, backend = proxy
    key, secret = make_key()
    backend.faults({"token_delay": 0.1})  # 100 tokens would take 10 s
    body = {"model": "llama-8b", "prompt": "A long story", "max_tokens": 100, "stream": True}
    got = 0
    with httpx.stream("POST", f"{base}/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {secret}"}) as response:  # fmt: skip
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {"):
                got += 1
                if got == 3:
                    break  # leaving the block closes the connection
    started = time.monotonic()
    # The engine serves one request at a time: it answers now only if it let go.
    direct = httpx.post(f"{backend.base}/v1/completions",
                        json={"model": "scripted", "prompt": "x", "max_tokens": 1}, timeout=30)  # fmt: skip
    assert direct.status_code == 200
    assert time.monotonic() - started < 2.0
    row = wait_until(lambda: ApiRequest.objects.filter(key=key, settled=True).first(), 10, "row")
    assert (row.status, row.error_code) == (499, "client_closed")
    assert 3 <= row.completion_tokens <= 6
    month = BudgetMonth.objects.get(account=f"key:{key.pk}")
    assert month.reserved == 0
    assert month.used == row.prompt_tokens + row.completion_tokens
    # ...and its place among the key's active requests was given back.
    client = redis.Redis.from_url(settings.REDIS_URL)
    assert client.zcard(active_key(key.pk)) == 0
    client.close()


def test_it_charges_an_abandoned_json_request_no_more_than_it_could_have_made(proxy, make_key):
    base, backend = proxy
    key, secret = make_key()
    backend.faults({"first_byte_delay": 2})
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{base}/completions", timeout=0.5,
                   json={"model": "llama-8b", "prompt": "Wait", "max_tokens": 300},
                   headers={"Authorization": f"Bearer {secret}"})  # fmt: skip
    row = wait_until(lambda: ApiRequest.objects.filter(key=key, settled=True).first(), 10, "row")
    assert (row.status, row.error_code) == (499, "client_closed")
    # ~0.5 s at the test server's assumed 13 tokens/s, not the 300 asked for.
    assert 1 <= row.completion_tokens <= 40
    assert BudgetMonth.objects.get(account=f"key:{key.pk}").reserved == 0
