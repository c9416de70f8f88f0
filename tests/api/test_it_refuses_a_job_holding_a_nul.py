"""A job's request is kept until it is harvested, and Postgres cannot keep U+0000 in a
JSON value: such a job is refused with a clear 400 naming the prompt before anything
is reserved or stored (a synchronous request with the same prompt is passed on)."""

import httpx
import pytest

from api.models import ApiRequest
from completions.models import BudgetMonth, Generation
from tests.api.conftest import ASYNC

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_the_job_and_reserves_nothing(proxy, make_key):
    base, backend = proxy
    key, secret = make_key()
    auth = {"Authorization": f"Bearer {secret}"}
    body = {"model": "llama-8b", "prompt": "before\u0000after", "max_tokens": 3}
    refused = httpx.post(f"{base}/completions", json=body, headers={**ASYNC, **auth})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("invalid_request", "prompt")
    assert "U+0000" in error["message"]
    assert not Generation.objects.filter(key=key).exists()
    assert not BudgetMonth.objects.filter(user=key.user, reserved__gt=0).exists()
    assert backend.requests() == []
    assert ApiRequest.objects.filter(key=key).count() == 1  # its metadata, as every request's
    sync = httpx.post(f"{base}/completions", json=body, headers=auth)
    assert sync.status_code == 200, sync.text
