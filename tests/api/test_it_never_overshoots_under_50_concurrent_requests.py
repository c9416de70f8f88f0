"""50 requests at once on a small budget: reservations under the month row's lock
clamp or refuse them so that what is charged never exceeds the budget."""

import asyncio

import httpx
import pytest

from api.models import ApiRequest
from completions.models import BudgetMonth
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

BUDGET = 400


async def fire(base: str, secret: str, count: int) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return await asyncio.gather(
            *[
                client.post(
                    f"{base}/completions",
                    json={"model": "llama-8b", "prompt": f"Request number {i}", "max_tokens": 20},
                    headers={"Authorization": f"Bearer {secret}"},
                )
                for i in range(count)
            ]
        )


def test_it_charges_at_most_the_budget(proxy, make_key):
    base, _ = proxy
    key, secret = make_key(budget=BUDGET)
    responses = asyncio.run(fire(base, secret, 50))
    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(ok) + len(refused) == 50
    assert ok and refused
    assert all(r.json()["error"]["code"] == "budget_exceeded" for r in refused)
    clamped = [r for r in ok if "x-acs-max-tokens-clamped" in r.headers]
    assert all("reason=budget,source=client" in r.headers["x-acs-max-tokens-clamped"]
               for r in clamped)  # fmt: skip
    wait_until(
        lambda: ApiRequest.objects.filter(key=key, settled=True).count() == 50, 20, "settled"
    )
    month = BudgetMonth.objects.get(account=f"key:{key.pk}")
    served = sum(r.json()["usage"]["total_tokens"] for r in ok)
    assert month.reserved == 0
    assert month.used == served <= BUDGET
