"""Monthly token budgets: refuse, don't clamp.

A run reserves its worst case (prompt tokens + prompt_count × n × max_tokens) under
SELECT ... FOR UPDATE on the user's month row before anything is sent; when it ends
the reservation is replaced by what was actually used. Months are calendar months
in UTC, so nothing needs resetting: a new month is a new row.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from completions.models import BudgetMonth, DailyUsage, TokenBudget
from completions.schema import MAX_OUTPUT_WORK


class BudgetRefused(Exception):
    """The run's worst case does not fit in what is left of this month's budget."""

    code = "budget_refused"

    def __init__(self, asked: int, left: int, max_tokens_fit: int) -> None:
        self.asked = asked
        self.left = left
        self.max_tokens_fit = max_tokens_fit
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = (
            f"This run could use up to {self.asked:,} tokens, but only {self.left:,} "
            "are left in this month's budget."
        )
        if self.max_tokens_fit >= 1:
            return text + f" The largest max_tokens that fits is {self.max_tokens_fit:,}."
        return text + " Nothing fits until the budget resets on the 1st (UTC)."

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "asked": self.asked,
            "left": self.left,
            "max_tokens_fit": self.max_tokens_fit,
            "message": self.message,
        }


def month_of(when: dt.datetime | None = None) -> dt.date:
    """The first day of the UTC calendar month holding `when` (default: now)."""
    when = when or timezone.now()
    return when.astimezone(dt.UTC).date().replace(day=1)


def next_reset(when: dt.datetime | None = None) -> dt.datetime:
    first = month_of(when)
    year, month = (first.year + 1, 1) if first.month == 12 else (first.year, first.month + 1)
    return dt.datetime(year, month, 1, tzinfo=dt.UTC)


def monthly_budget(user: Any) -> int:
    override = (
        TokenBudget.objects.filter(user=user).values_list("monthly_tokens", flat=True).first()
    )
    return settings.WEFT_MONTHLY_TOKEN_BUDGET if override is None else override


def usage_summary(user: Any, month: dt.date | None = None) -> dict[str, int]:
    month = month or month_of()
    row = BudgetMonth.objects.filter(user=user, month=month).first()
    budget = monthly_budget(user)
    used = row.used if row else 0
    reserved = row.reserved if row else 0
    return {
        "budget": budget,
        "used": used,
        "reserved": reserved,
        "remaining": max(0, budget - used - reserved),
    }


def daily_breakdown(user: Any, month: dt.date | None = None) -> list[DailyUsage]:
    month = month or month_of()
    end = next_reset(dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)).date()
    return list(DailyUsage.objects.filter(user=user, day__gte=month, day__lt=end).order_by("day"))


def max_tokens_fit(left: int, prompt_tokens: int, choice_count: int) -> int:
    per_choice = (left - prompt_tokens) // max(1, choice_count)
    cap = MAX_OUTPUT_WORK // max(1, choice_count)
    return max(0, min(per_choice, cap))


def reserve(user: Any, asked: int, *, prompt_tokens: int, choice_count: int) -> dt.date:
    """Reserve `asked` tokens against this month or raise BudgetRefused. Must run inside
    transaction.atomic(): the month row stays locked until the caller commits, so the
    generation row that owns the reservation is created under the same lock."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("reserve() must run inside transaction.atomic()")
    month = month_of()
    BudgetMonth.objects.bulk_create([BudgetMonth(user=user, month=month)], ignore_conflicts=True)
    row = BudgetMonth.objects.select_for_update().get(user=user, month=month)
    left = max(0, monthly_budget(user) - row.used - row.reserved)
    if asked > left:
        raise BudgetRefused(asked, left, max_tokens_fit(left, prompt_tokens, choice_count))
    BudgetMonth.objects.filter(pk=row.pk).update(reserved=F("reserved") + asked)
    return month


def settle(
    user_id: int, month: dt.date, reserved: int, prompt_tokens: int, completion_tokens: int
) -> int:
    """Replace a reservation by actual usage (inside the caller's transaction);
    returns the tokens charged."""
    charged = prompt_tokens + completion_tokens
    BudgetMonth.objects.bulk_create(
        [BudgetMonth(user_id=user_id, month=month)], ignore_conflicts=True
    )
    BudgetMonth.objects.filter(user_id=user_id, month=month).update(
        reserved=F("reserved") - reserved, used=F("used") + charged
    )
    if charged:
        day = timezone.now().astimezone(dt.UTC).date()
        DailyUsage.objects.bulk_create(
            [DailyUsage(user_id=user_id, day=day)], ignore_conflicts=True
        )
        DailyUsage.objects.filter(user_id=user_id, day=day).update(
            prompt_tokens=F("prompt_tokens") + prompt_tokens,
            completion_tokens=F("completion_tokens") + completion_tokens,
            runs=F("runs") + 1,
        )
    return charged
