"""A request both the limits (Redis) and the budget (Postgres) would refuse is answered
with the limits' refusal: they come first. A request the limits refuse is charged
nothing and leaves nothing reserved; a place held for a request the budget refuses is
freed at once. (Pinned so that reordering or overlapping the two checks — e.g. asking
both at once — cannot change what a client sees.)"""

import httpx
import pytest
import redis
from django.conf import settings

from api.limits import active_key
from api.models import ApiRequest
from completions.models import BudgetMonth
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "In order", "max_tokens": 4}
RATE = 8  # limited_pair's starts per minute


def post(base: str, secret: str) -> httpx.Response:
    return httpx.post(f"{base}/completions", json=BODY,
                      headers={"Authorization": f"Bearer {secret}"}, timeout=30)  # fmt: skip


def code(response: httpx.Response) -> str:
    return response.json()["error"]["code"]


def month(key) -> tuple[int, int]:
    row = BudgetMonth.objects.filter(
        account=f"key:{key.pk}"
    ).first()  # none when nothing was ever reserved
    return (row.used, row.reserved) if row else (0, 0)


def all_settled(key) -> None:
    wait_until(lambda: not ApiRequest.objects.filter(key=key, settled=False).exists(), 10,
               "every request settled")  # fmt: skip


def test_it_gives_back_a_reservation_the_limits_refuse(limited_pair, make_key):
    (a, b), _ = limited_pair
    key, secret = make_key(budget=10**9)
    for i in range(RATE):
        assert post(a if i % 2 else b, secret).status_code == 200
    all_settled(key)
    used, _ = month(key)
    refused = post(a, secret)
    assert refused.status_code == 429
    assert code(refused) == "rate_limited"
    all_settled(key)
    assert month(key) == (used, 0)  # nothing charged, nothing kept
    row = ApiRequest.objects.get(request_id=refused.headers["x-request-id"])
    assert (row.status, row.error_code) == (429, "rate_limited")
    assert (row.prompt_tokens, row.completion_tokens) == (0, 0)


def test_it_frees_the_place_of_a_request_the_budget_refuses(limited_pair, make_key):
    (a, _), _ = limited_pair
    key, secret = make_key(budget=1)  # the prompt alone does not fit
    refused = post(a, secret)
    assert refused.status_code == 429
    assert code(refused) == "budget_exceeded"
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        wait_until(lambda: client.zcard(active_key(key.pk)) == 0, 5, "the place freed")
    finally:
        client.close()
    assert month(key) == (0, 0)


def test_it_answers_the_limits_refusal_when_both_refuse(limited_pair, make_key):
    (a, b), _ = limited_pair
    key, secret = make_key(budget=1)
    codes = [code(post(a if i % 2 else b, secret)) for i in range(RATE + 1)]
    # Each refused start counts; past the rate, the limits' refusal is the one answered.
    assert codes == ["budget_exceeded"] * RATE + ["rate_limited"]
    all_settled(key)
    assert month(key) == (0, 0)
