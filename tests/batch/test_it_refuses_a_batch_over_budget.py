"""Refuse, don't clamp: the whole batch's worst case is checked against what is left
of the month's budget before anything is sent, and the refusal says what fits."""

import html

import httpx
import pytest

from batch.models import Batch
from completions.models import BudgetMonth, Generation, TokenBudget
from tests.batch.conftest import upload

pytestmark = pytest.mark.django_db


def _count(engine, text: str) -> int:
    return httpx.post(f"{engine.url}/tokenize", json={"prompt": text}).json()["count"]


def test_it_refuses_a_batch_over_budget(engine, client, make_user):
    user = make_user()
    client.force_login(user)
    TokenBudget.objects.create(user=user, monthly_tokens=200)
    prompts = [f"Prompt number {i} says" for i in range(5)]
    counts = [_count(engine, p) for p in prompts]
    # 5 prompts x n=2 x max_tokens 20 = 200 output tokens alone: over a 200 budget.
    response = upload(client, "\n".join(prompts), "five.txt", n="2", max_tokens="20")
    text = html.unescape(response.content.decode())
    assert response.status_code == 200 and "Refused — nothing was sent." in text
    asked = sum(counts) + 5 * 2 * 20
    assert f"could use up to {asked:,} tokens, but only 200 are left" in text
    fit = (200 - sum(counts)) // 10
    assert f"the largest max_tokens that fits every prompt is {fit}" in text
    first = 0
    while sum(counts[: first + 1]) + (first + 1) * 40 <= 200:
        first += 1
    assert f"the first {first} prompts fit with these settings" in text
    assert Batch.objects.count() == 0 and Generation.objects.count() == 0
    assert not BudgetMonth.objects.filter(user=user, reserved__gt=0).exists()
    assert engine.completions() == []

    # What the message said fits does fit.
    response = upload(client, "\n".join(prompts), "five.txt", n="2", max_tokens=str(fit),
                      **{"logprobs": "0"})  # fmt: skip
    assert response.status_code == 302, html.unescape(response.content.decode())[-800:]
    assert Batch.objects.get().params["max_tokens"] == fit


def test_it_says_when_nothing_fits(engine, client, make_user):
    user = make_user()
    client.force_login(user)
    TokenBudget.objects.create(user=user, monthly_tokens=3)
    response = upload(client, "a much longer prompt than three tokens\n", "one.txt")
    text = html.unescape(response.content.decode())
    assert "Nothing fits until the budget resets on the 1st (UTC)." in text
    assert Batch.objects.count() == 0
