"""The one token ledger: every caller reserves its worst case, then settles to actual use
exactly once — page runs, Batch prompts, API jobs and the synchronous /v1 proxy alike.

Accounts, one BudgetMonth row per account and calendar month (UTC; a new month is a
new row, so nothing is ever reset):

- `pages:<user>`: the pages' budget (Workbench, Loom, Inspect, Batch), WEFT_MONTHLY_TOKEN_BUDGET
  or the user's override. The pages refuse a run that does not fit (BudgetRefused).
- `api:<user>`: the allowance all the user's keys share, WEFT_API_USER_MONTHLY_BUDGET or
  the user's override; and `key:<key>`: that key's own cap inside it (the key's
  override, else WEFT_API_KEY_MONTHLY_BUDGET). An API request draws on both; the API
  clamps max_tokens to what fits in both (api.ledger), so keys cannot multiply a budget.

The arithmetic happens in one place, the SQL function `weft_reserve` (migration
completions 0003): it creates the month rows, locks every account of the reservation in
account order (two callers can never deadlock), computes how many tokens per choice fit
— `max_tokens_fit` below is the same rule, for plans made before any lock — and adds the
reservation to every account, all in one statement. Settling subtracts the reservation
and adds what was charged, on the same accounts, inside the caller's transaction.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from completions.models import BudgetMonth, DailyUsage, TokenBudget
from completions.schema import MAX_OUTPUT_WORK

PAGES, API, KEY = "pages", "api", "key"


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


# --- accounts and their budgets --------------------------------------------------------


@dataclass(frozen=True)
class Account:
    name: str  # pages:<user> | api:<user> | key:<key>
    budget: int


def _overrides(user_id: int) -> tuple[int | None, int | None]:
    row = TokenBudget.objects.filter(user_id=user_id).values_list(
        "monthly_tokens", "api_monthly_tokens"
    )
    found = row.first()
    return found if found is not None else (None, None)


def monthly_budget(user: Any) -> int:
    """The user's pages budget this month."""
    pages, _ = _overrides(_id(user))
    return settings.WEFT_MONTHLY_TOKEN_BUDGET if pages is None else pages


def api_allowance(user: Any) -> int:
    """The API allowance the user's keys share this month."""
    _, api = _overrides(_id(user))
    return settings.WEFT_API_USER_MONTHLY_BUDGET if api is None else api


def _id(user: Any) -> int:
    return user if isinstance(user, int) else user.pk


def pages_accounts(user: Any) -> list[Account]:
    return [Account(f"{PAGES}:{_id(user)}", monthly_budget(user))]


def api_accounts(user_id: int, key_id: int, key_budget: int, allowance: int) -> list[Account]:
    return [Account(f"{API}:{user_id}", allowance), Account(f"{KEY}:{key_id}", key_budget)]


def accounts_of(owner_id: int, key: Any | None) -> list[Account]:
    """The accounts a run draws on: a page run the owner's pages budget; an API job the
    owner's API allowance and its key's cap."""
    if key is None:
        return pages_accounts(owner_id)
    return api_accounts(owner_id, key.pk, key.budget_tokens(), api_allowance(owner_id))


def account_names(owner_id: int, key_id: int | None) -> list[str]:
    if key_id is None:
        return [f"{PAGES}:{owner_id}"]
    return [f"{API}:{owner_id}", f"{KEY}:{key_id}"]


# --- the rule, and the one statement that applies it under the lock -----------------------


def max_tokens_fit(left: int, prompt_tokens: int, choice_count: int) -> int:
    """Tokens per choice that fit in `left` after the prompt (weft_reserve computes the
    same under the accounts' locks)."""
    return max(0, (left - prompt_tokens) // max(1, choice_count))


def suggested_max_tokens(fit: int, choice_count: int) -> int:
    """What a refusal suggests: the fit, within the output-work rule (a larger value
    would be refused by validation, not by the budget)."""
    return max(0, min(fit, MAX_OUTPUT_WORK // max(1, choice_count)))


def unmetered(prompt_tokens: int, max_tokens: int, choice_count: int) -> tuple[int, int]:
    """A backend's JSON answer that says nothing of its usage: the prompt and every
    token that was asked for — the most it can have been, never more than was reserved.
    The same for a job and for the synchronous /v1 path."""
    return prompt_tokens, max(0, max_tokens) * max(1, choice_count)


RESERVE_SQL = (
    "SELECT fit, left_tokens FROM weft_reserve("
    "%(accounts)s, %(budgets)s, %(user)s, %(month)s, %(prompt)s, %(choices)s, "
    "%(max_tokens)s, %(clamp)s)"
)


def reserve_params(
    accounts: list[Account],
    *,
    user_id: int,
    month: dt.date,
    prompt_tokens: int,
    choices: int,
    max_tokens: int,
    clamp: bool,
) -> dict[str, Any]:
    return {
        "accounts": [a.name for a in accounts],
        "budgets": [a.budget for a in accounts],
        "user": user_id,
        "month": month,
        "prompt": prompt_tokens,
        "choices": max(1, choices),
        "max_tokens": max_tokens,
        "clamp": clamp,
    }


def reserve(user: Any, asked: int, *, prompt_tokens: int, choice_count: int) -> dt.date:
    """Reserve a page run's worst case (`asked` = prompt + choices × max_tokens) on the
    user's pages account or raise BudgetRefused. Must run inside transaction.atomic():
    the account stays locked until the caller commits, so the run row that owns the
    reservation is created under the same lock."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("reserve() must run inside transaction.atomic()")
    month = month_of()
    per_choice = max(0, asked - prompt_tokens) // max(1, choice_count)
    params = reserve_params(
        pages_accounts(user), user_id=_id(user), month=month, prompt_tokens=prompt_tokens,
        choices=choice_count, max_tokens=per_choice, clamp=False,
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(RESERVE_SQL, params)
        fit, left = cursor.fetchone()
    if fit < per_choice or left < asked:
        raise BudgetRefused(asked, left, suggested_max_tokens(fit, choice_count))
    return month


SETTLE_SQL = (
    "UPDATE completions_budgetmonth SET reserved = reserved - %(reserved)s, "
    "used = used + %(charged)s WHERE account = ANY(%(accounts)s) AND month = %(month)s"
)


def settle(
    user_id: int,
    month: dt.date,
    reserved: int,
    prompt_tokens: int,
    completion_tokens: int,
    *,
    key_id: int | None = None,
) -> int:
    """Replace a reservation by actual usage (never more than was reserved), inside the
    caller's transaction; returns the tokens charged. Page runs also count in the
    user's daily usage (the Usage page)."""
    charged = min(reserved, prompt_tokens + completion_tokens) if reserved else 0
    with connection.cursor() as cursor:
        cursor.execute(
            SETTLE_SQL,
            {
                "reserved": reserved,
                "charged": charged,
                "accounts": account_names(user_id, key_id),
                "month": month,
            },
        )
    if charged and key_id is None:
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


# --- readers -------------------------------------------------------------------------------


def summary(account: Account, month: dt.date | None = None) -> dict[str, int]:
    """One account's month: {budget, used, reserved, remaining}."""
    month = month or month_of()
    row = BudgetMonth.objects.filter(account=account.name, month=month).first()
    used = row.used if row else 0
    reserved = row.reserved if row else 0
    return {
        "budget": account.budget,
        "used": used,
        "reserved": reserved,
        "remaining": max(0, account.budget - used - reserved),
    }


def usage_summary(user: Any, month: dt.date | None = None) -> dict[str, int]:
    """The user's pages budget this month."""
    return summary(pages_accounts(user)[0], month)


def api_summary(user: Any, month: dt.date | None = None) -> dict[str, int]:
    """The user's shared API allowance this month."""
    return summary(Account(f"{API}:{_id(user)}", api_allowance(user)), month)


def key_summary(key: Any, month: dt.date | None = None) -> dict[str, int]:
    """One key's month against its own cap; `remaining` is what it can still use, so
    also bounded by what is left of its user's allowance."""
    own = summary(Account(f"{KEY}:{key.pk}", key.budget_tokens()), month)
    shared = api_summary(key.user_id, month)
    return {**own, "remaining": min(own["remaining"], shared["remaining"])}


def daily_breakdown(user: Any, month: dt.date | None = None) -> list[DailyUsage]:
    month = month or month_of()
    end = next_reset(dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)).date()
    return list(DailyUsage.objects.filter(user=user, day__gte=month, day__lt=end).order_by("day"))
