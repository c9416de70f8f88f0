"""A user's keys draw on one API allowance: 50 requests at once, spread over three keys
of one user (each key's own cap far above the allowance), are clamped or refused so
that what the user is charged never passes the allowance — budgets do not multiply by
the number of keys. Another user's allowance is untouched."""

import asyncio

import httpx
import pytest

from api.models import ApiRequest
from completions.budget import api_summary
from completions.models import BudgetMonth, TokenBudget
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

ALLOWANCE = 500


async def fire(base: str, secrets: list[str], count: int) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return await asyncio.gather(
            *[
                client.post(
                    f"{base}/completions",
                    json={"model": "llama-8b", "prompt": f"Shared {i}", "max_tokens": 20},
                    headers={"Authorization": f"Bearer {secrets[i % len(secrets)]}"},
                )
                for i in range(count)
            ]
        )


def test_it_charges_a_users_keys_at_most_their_one_allowance(proxy, make_user, make_key):
    base, _ = proxy
    user, bystander = make_user(), make_user()
    TokenBudget.objects.create(user=user, api_monthly_tokens=ALLOWANCE)
    keys = [make_key(user=user, name=f"k{i}", budget=10**6) for i in range(3)]
    responses = asyncio.run(fire(base, [secret for _, secret in keys], 50))
    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(ok) + len(refused) == 50 and ok and refused
    assert {r.json()["error"]["code"] for r in refused} == {"budget_exceeded"}
    assert len({r.request.headers["authorization"] for r in ok}) == 3  # every key served
    wait_until(
        lambda: ApiRequest.objects.filter(user=user, settled=True).count() == 50, 20, "settled"
    )
    served = sum(r.json()["usage"]["total_tokens"] for r in ok)
    shared = BudgetMonth.objects.get(account=f"api:{user.pk}")
    assert (shared.reserved, shared.used) == (0, served)
    assert served <= ALLOWANCE  # 0 overshoot
    per_key = BudgetMonth.objects.filter(account__in=[f"key:{k.pk}" for k, _ in keys])
    assert sum(per_key.values_list("used", flat=True)) == served
    assert api_summary(user)["remaining"] == ALLOWANCE - served
    assert api_summary(bystander)["used"] == 0
