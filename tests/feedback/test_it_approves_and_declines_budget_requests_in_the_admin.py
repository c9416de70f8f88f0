"""Staff answer budget requests with the admin's actions: approving adds the amount
to the budget it names — the user's page budget (its override made when missing) or
the key's — once; declining changes no budget; the user sees the answer, and a run
that did not fit fits afterwards."""

import pytest
from django.core import mail
from django.db import transaction

from api.models import ApiKey
from completions import budget
from completions.budget import BudgetRefused
from completions.models import TokenBudget
from feedback.models import BudgetRequest

pytestmark = pytest.mark.django_db
CHANGELIST = "/admin/feedback/budgetrequest/"


def _act(client, action: str, *items) -> str:
    response = client.post(
        CHANGELIST, {"action": action, "_selected_action": [i.pk for i in items]}, follow=True
    )
    assert response.status_code == 200
    return response.content.decode()


def _fits(user, tokens: int) -> bool:
    try:
        with transaction.atomic():
            budget.reserve(user, tokens, prompt_tokens=1, choice_count=1)
            transaction.set_rollback(True)
    except BudgetRefused:
        return False
    return True


def test_it_raises_the_page_budget_once_on_approval(client, make_user, settings,
                                                    django_capture_on_commit_callbacks):  # fmt: skip
    settings.WEFT_MONTHLY_TOKEN_BUDGET = 1000
    settings.WEFT_NOTIFY_EMAIL = "infra@example.org"
    user = make_user(email="u@example.org")
    asked = BudgetRequest.objects.create(owner=user, amount=4000, reason="long texts")
    assert not _fits(user, 3000)
    client.force_login(make_user(is_staff=True, is_superuser=True))
    with django_capture_on_commit_callbacks(execute=True):
        page = _act(client, "approve", asked)
    assert "Approved 1 request." in page
    asked.refresh_from_db()
    assert asked.state == "approved" and (asked.budget_before, asked.budget_after) == (1000, 5000)
    assert TokenBudget.objects.get(user=user).monthly_tokens == 5000
    assert _fits(user, 3000)
    assert [m.to for m in mail.outbox] == [["u@example.org"]]
    assert "approved" in mail.outbox[0].subject and "5,000 tokens a month" in mail.outbox[0].body

    page = _act(client, "approve", asked)  # decided already: nothing more is added
    assert "had an answer already" in page
    assert TokenBudget.objects.get(user=user).monthly_tokens == 5000

    client.force_login(user)
    usage = client.get("/usage/").content.decode()
    assert 'badge approved">approved<' in usage and "the budget went from 1000 to 5000" in usage


def test_it_adds_to_an_existing_override_and_to_a_keys_budget(client, make_user, settings):
    settings.WEFT_API_KEY_MONTHLY_BUDGET = 2000
    settings.WEFT_API_USER_MONTHLY_BUDGET = 3000
    user = make_user()
    TokenBudget.objects.create(user=user, monthly_tokens=700)
    key, _ = ApiKey.objects.create_key(user, "k")
    client.force_login(make_user(is_staff=True, is_superuser=True))
    pages = BudgetRequest.objects.create(owner=user, amount=300, reason="a")
    assert "Approved 1 request." in _act(client, "approve", pages)
    for_key = BudgetRequest.objects.create(owner=user, key=key, amount=500, reason="b")
    assert "Approved 1 request." in _act(client, "approve", for_key)
    assert TokenBudget.objects.get(user=user).monthly_tokens == 1000
    key.refresh_from_db()
    assert key.monthly_budget == 2500 and key.budget_tokens() == 2500
    # The key's cap lies inside the user's shared allowance: that grows as much.
    assert TokenBudget.objects.get(user=user).api_monthly_tokens == 3500


def test_it_declines_without_changing_a_budget(client, make_user):
    user = make_user()
    asked = BudgetRequest.objects.create(owner=user, amount=300, reason="a")
    client.force_login(make_user(is_staff=True, is_superuser=True))
    assert "Declined 1 request." in _act(client, "decline", asked)
    asked.refresh_from_db()
    assert asked.state == "declined" and asked.budget_after is None
    assert not TokenBudget.objects.filter(user=user).exists()
    assert "Approved 0 requests." in _act(client, "approve", asked)


def test_it_keeps_the_admin_to_staff(client, make_user):
    user = make_user()
    asked = BudgetRequest.objects.create(owner=user, amount=300, reason="a")
    client.force_login(user)
    response = client.post(CHANGELIST, {"action": "approve", "_selected_action": [asked.pk]})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    asked.refresh_from_db()
    assert asked.state == "pending"
