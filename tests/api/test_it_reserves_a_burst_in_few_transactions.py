"""A burst's reservations go to Postgres together (api.ledger over api.batching): twenty
requests reserved at once commit in one or two transactions, not twenty, and each is
reserved exactly once, in full. A batch that fails is run again statement by
statement, so one bad statement costs only its own request."""

import asyncio

import pytest
from django.db import connection

from api import ledger
from api.models import ApiRequest
from completions.models import BudgetMonth

pytestmark = pytest.mark.django_db(transaction=True)


def request_row(key, request_id: str) -> dict:
    return ledger.request_row(request_id=request_id, key_id=key.pk, key_prefix=key.prefix,
                              user_id=key.user_id, endpoint="/v1/completions")  # fmt: skip


async def burst(key, request_ids: list[str]) -> list:
    try:
        return await asyncio.gather(
            *(
                ledger.reserve(
                    request_row(key, rid),
                    user_id=key.user_id,
                    key_id=key.pk,
                    key_budget=10**9,
                    allowance=10**9,
                    prompt_tokens=10,
                    choices=1,
                    max_tokens=5,
                )  # fmt: skip
                for rid in request_ids
            ),
            return_exceptions=True,
        )
    finally:
        await ledger.close_pool()


def transactions_of(prefix: str) -> int:
    """How many transactions wrote these rows: rows one transaction inserted share its xid."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(DISTINCT xmin::text) FROM api_apirequest WHERE request_id LIKE %s",
            [prefix + "%"],
        )
        return cur.fetchone()[0]


def test_it_commits_a_burst_in_one_or_two_transactions(make_key):
    key, _ = make_key()
    made = asyncio.run(burst(key, [f"burst-{i}" for i in range(20)]))
    assert [(r.request_id, r.reserved, r.max_tokens, r.clamped) for r in made] == [
        (f"burst-{i}", 15, 5, False) for i in range(20)
    ]
    assert BudgetMonth.objects.get(account=f"key:{key.pk}").reserved == 20 * 15
    rows = ApiRequest.objects.filter(request_id__startswith="burst-")
    assert sorted(rows.values_list("reserved_tokens", "settled")) == [(15, False)] * 20
    assert transactions_of("burst-") <= 2  # one each would be 20


def test_it_runs_a_failed_batch_again_statement_by_statement(make_key):
    key, _ = make_key()
    ApiRequest.objects.create(request_id="mixed-3", key=key, endpoint="/v1/completions")
    ids = [f"mixed-{i}" for i in range(6)]
    made = asyncio.run(burst(key, ids))
    # mixed-3's row exists already: its insert fails, which fails the whole batch (one
    # transaction, nothing committed); run again one by one, only mixed-3 fails.
    assert [isinstance(r, Exception) for r in made] == [False, False, False, True, False, False]
    assert (
        BudgetMonth.objects.get(account=f"key:{key.pk}").reserved == 5 * 15
    )  # each once, none twice
    reserved = ApiRequest.objects.filter(request_id__in=ids, settled=False)
    assert sorted(reserved.values_list("request_id", "reserved_tokens")) == [
        (rid, 15) for rid in ids if rid != "mixed-3"
    ]
