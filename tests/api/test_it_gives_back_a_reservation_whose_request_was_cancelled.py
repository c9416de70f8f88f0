"""A request cancelled (its client gone) while its reservation is on its way to Postgres
is not left holding it: when the reservation is made, it is given back at once —
charged nothing, its row settled as client_closed — rather than waiting for the sweep
of dead processes' reservations."""

import asyncio

import psycopg
import pytest
from django.db import connection, connections

from api import ledger
from api.models import ApiRequest
from completions.budget import month_of
from completions.models import BudgetMonth

pytestmark = pytest.mark.django_db(transaction=True)


def the_row() -> ApiRequest:
    try:
        return ApiRequest.objects.get(request_id="gone-1")
    finally:
        connection.close()  # this thread's own connection


async def cancel_while_out(key, blocker: psycopg.Connection) -> ApiRequest:
    row = ledger.request_row(request_id="gone-1", key_id=key.pk, key_prefix=key.prefix,
                             user_id=key.user_id, endpoint="/v1/completions")  # fmt: skip
    caller = asyncio.ensure_future(
        ledger.reserve(
            row,
            user_id=key.user_id,
            key_id=key.pk,
            key_budget=10**9,
            allowance=10**9,
            prompt_tokens=10,
            choices=1,
            max_tokens=90,
        )  # fmt: skip
    )
    try:
        await asyncio.sleep(0.3)  # its batch is out, waiting for the month row's lock
        assert not caller.done()
        caller.cancel()
        await asyncio.to_thread(blocker.commit)  # the batch goes through
        for _ in range(100):
            found = await asyncio.to_thread(the_row)
            if found.settled:
                return found
            await asyncio.sleep(0.05)
        raise AssertionError("the reservation was never given back")
    finally:
        await ledger.close_pool()


def test_it_gives_the_reservation_back_at_once(make_key):
    key, _ = make_key()
    for account in (f"api:{key.user_id}", f"key:{key.pk}"):
        BudgetMonth.objects.create(account=account, user=key.user, month=month_of())
    params = dict(connections["default"].get_connection_params())
    for sync_only in ("cursor_factory", "context"):
        params.pop(sync_only, None)
    with psycopg.connect(**params) as blocker:
        blocker.execute(
            "SELECT 1 FROM completions_budgetmonth WHERE account = %s FOR UPDATE",
            [f"api:{key.user_id}"],
        )
        found = asyncio.run(cancel_while_out(key, blocker))
    assert (found.status, found.error_code, found.completion_tokens) == (499, "client_closed", 0)
    for month in BudgetMonth.objects.filter(user=key.user):  # the key's and its user's
        assert (month.reserved, month.used) == (0, 0)
