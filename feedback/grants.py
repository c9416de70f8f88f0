"""Staff's answer to a budget request: approving raises the budget it names by its
amount — the user's page budget (completions.models.TokenBudget, made when missing) or
the API key's (ApiKey.monthly_budget) — and records the figures; declining records
the answer. Each decision happens once, under the request's row lock."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from api.models import ApiKey
from completions import budget
from completions.models import TokenBudget
from feedback import notify
from feedback.models import BudgetRequest


def raise_budget(owner: Any, key: ApiKey | None, amount: int) -> tuple[int, int]:
    """Add `amount` to the monthly budget of `key`, or of `owner`'s pages when `key` is
    None: (budget before, budget after). The one place an approval changes a budget
    (inside the caller's transaction). A key's cap lies inside its user's shared API
    allowance (completions.budget), so a key's raise raises the allowance too: else the
    tokens granted to the key could not be used once the allowance is spent."""
    TokenBudget.objects.get_or_create(user=owner)
    row = TokenBudget.objects.select_for_update().get(user=owner)
    if key is not None:
        locked = ApiKey.objects.select_for_update().get(pk=key.pk)
        before = locked.budget_tokens()
        locked.monthly_budget = before + amount
        locked.save(update_fields=["monthly_budget"])
        row.api_monthly_tokens = budget.api_allowance(owner) + amount
        row.save(update_fields=["api_monthly_tokens"])
        return before, locked.monthly_budget
    before = budget.monthly_budget(owner)
    row.monthly_tokens = before + amount
    row.save(update_fields=["monthly_tokens"])
    return before, row.monthly_tokens


class OwnRequest(PermissionDenied):
    """Staff decide other people's requests: approving your own would be raising your
    own budget (and declining it is withdrawing it, which the Usage page does)."""


def _decide(request: BudgetRequest, staff: Any, state: str, reply: str) -> bool:
    with transaction.atomic():
        row = BudgetRequest.objects.select_for_update().get(pk=request.pk)
        if row.owner_id == staff.pk:
            raise OwnRequest("staff cannot decide their own budget request")
        if row.state != BudgetRequest.State.PENDING:
            return False
        if state == BudgetRequest.State.APPROVED:
            row.budget_before, row.budget_after = raise_budget(row.owner, row.key, row.amount)
        row.state = state
        row.decided_by = staff
        row.decided_at = timezone.now()
        row.reply = reply or row.reply
        row.save()
        transaction.on_commit(lambda: notify.decision(row))
    request.refresh_from_db()
    return True


def approve(request: BudgetRequest, staff: Any, reply: str = "") -> bool:
    """Raise the budget; False when the request was decided already (nothing changes).
    Raises OwnRequest when `staff` asked for it: this is the one place approval
    happens, so the rule holds for the admin and for any caller to come."""
    return _decide(request, staff, BudgetRequest.State.APPROVED, reply)


def decline(request: BudgetRequest, staff: Any, reply: str = "") -> bool:
    return _decide(request, staff, BudgetRequest.State.DECLINED, reply)


def withdraw(request: BudgetRequest) -> bool:
    """The user takes back a request staff have not answered."""
    with transaction.atomic():
        changed = BudgetRequest.objects.filter(
            pk=request.pk, state=BudgetRequest.State.PENDING
        ).update(state=BudgetRequest.State.WITHDRAWN, decided_at=timezone.now())
    request.refresh_from_db()
    return bool(changed)
