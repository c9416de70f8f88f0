"""A request whose Redis lease was lost while it ran on (Redis restarted, a long stall)
is taken for dead by the sweep, which gives its reservation back; when the request
then ends, what it used is still charged — once — and nothing stays reserved. A
request that really died stays charged nothing."""

import asyncio
import datetime as dt

import pytest
from django.utils import timezone

from api import ledger
from api.models import ApiRequest
from completions.models import BudgetMonth

pytestmark = pytest.mark.django_db(transaction=True)


def accounts(key) -> list[tuple[int, int]]:
    rows = BudgetMonth.objects.filter(account__in=[f"api:{key.user_id}", f"key:{key.pk}"])
    return sorted(rows.values_list("reserved", "used"))


async def reserve(key, request_id: str) -> ledger.Reservation:
    try:
        row = ledger.request_row(request_id=request_id, key_id=key.pk, key_prefix=key.prefix,
                                 user_id=key.user_id, endpoint="/v1/completions")  # fmt: skip
        res = await ledger.reserve(
            row, user_id=key.user_id, key_id=key.pk, key_budget=10**6, allowance=10**6,
            prompt_tokens=10, choices=1, max_tokens=90,
        )  # fmt: skip
        assert res is not None
        return res
    finally:
        await ledger.close_pool()


async def settle(res: ledger.Reservation, prompt: int, completion: int) -> None:
    try:
        await ledger.settle(res, prompt, completion, status=200, finished_at=timezone.now())
        await ledger.settle(res, prompt, completion, status=200)  # a second settle: nothing
    finally:
        await ledger.close_pool()


def test_it_charges_what_was_streamed_after_the_sweep_released_it(make_key):
    key, _ = make_key()
    running = asyncio.run(reserve(key, "req-lost-lease"))
    asyncio.run(reserve(key, "req-dead"))
    assert accounts(key) == [(200, 0), (200, 0)]
    long_ago = timezone.now() - dt.timedelta(minutes=10)
    ApiRequest.objects.filter(request_id__in=["req-lost-lease", "req-dead"]).update(
        created_at=long_ago
    )
    assert ledger.release_stale() == 2  # neither has a lease in Redis any more
    assert accounts(key) == [(0, 0), (0, 0)]

    asyncio.run(settle(running, 10, 35))  # the stream ran on, and ends
    assert accounts(key) == [(0, 45), (0, 45)]
    row = ApiRequest.objects.get(request_id="req-lost-lease")
    assert (row.settled, row.released_at, row.completion_tokens) == (True, None, 35)
    dead_row = ApiRequest.objects.get(request_id="req-dead")
    assert (dead_row.error_code, dead_row.completion_tokens) == ("process_lost", 0)
