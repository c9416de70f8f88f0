"""A web process that dies mid-request leaves its reservation unsettled; beat's sweep
gives it back once the request's lease in Redis is gone — and leaves live ones alone."""

import datetime as dt

import pytest
import redis
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from api import ledger
from api.limits import active_key
from api.models import ApiRequest
from api.tasks import release_stale_api_reservations
from completions.budget import key_summary, month_of
from completions.models import BudgetMonth

pytestmark = pytest.mark.django_db


def in_flight(key, request_id: str, reserved: int, age_seconds: float) -> ApiRequest:
    accounts = (f"api:{key.user_id}", f"key:{key.pk}")
    for account in accounts:
        BudgetMonth.objects.get_or_create(account=account, user=key.user, month=month_of())
    BudgetMonth.objects.filter(account__in=accounts).update(reserved=F("reserved") + reserved)
    return ApiRequest.objects.create(
        request_id=request_id, key=key, key_prefix=key.prefix, user=key.user,
        endpoint="/v1/completions", reserved_tokens=reserved, budget_month=month_of(),
        settled=False, created_at=timezone.now() - dt.timedelta(seconds=age_seconds),
    )  # fmt: skip


def test_it_releases_only_what_no_process_holds(make_key):
    key, _ = make_key()
    dead = in_flight(key, "req-dead", 500, age_seconds=600)
    alive = in_flight(key, "req-alive", 70, age_seconds=600)
    young = in_flight(key, "req-young", 30, age_seconds=1)
    client = redis.Redis.from_url(settings.REDIS_URL)
    seconds, _ = client.time()
    client.zadd(active_key(key.pk), {"req-alive": (seconds + 30) * 1000})  # a renewed lease
    try:
        assert release_stale_api_reservations() == 1
        assert ledger.release_stale() == 0  # once
    finally:
        client.delete(active_key(key.pk))
    dead.refresh_from_db()
    assert (dead.settled, dead.error_code) == (True, "process_lost")
    assert not ApiRequest.objects.get(pk=alive.pk).settled
    assert not ApiRequest.objects.get(pk=young.pk).settled
    assert BudgetMonth.objects.get(account=f"key:{key.pk}").reserved == 100
    assert BudgetMonth.objects.get(account=f"api:{key.user_id}").reserved == 100
    assert key_summary(key)["reserved"] == 100
