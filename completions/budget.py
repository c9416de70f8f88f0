"""The one token ledger: every caller reserves its worst case, then settles to actual use
exactly once — page runs, Batch prompts, Loom expansions, API jobs and the synchronous
/v1 proxy alike. Every rule of it is here, once; other modules run its statements
(api.ledger carries the proxy's over an async connection pool, in batches).

Accounts, one BudgetMonth row per account and calendar month (UTC; a new month is a
new row, so nothing is ever reset), named by `pages_account` / `api_account` /
`key_account` / `hold_account` only:

- `pages:<user>`: the pages' budget (Workbench, Loom, Inspect, Batch), WEFT_MONTHLY_TOKEN_BUDGET
  or the user's override. The pages refuse a run that does not fit (BudgetRefused).
- `api:<user>`: the allowance all the user's keys share, WEFT_API_USER_MONTHLY_BUDGET or
  the user's override; and `key:<key>`: that key's own cap inside it (the key's
  override, else WEFT_API_KEY_MONTHLY_BUDGET). An API request draws on both; the API
  clamps max_tokens to what fits in both, so keys cannot multiply a budget.
- `hold:<name>`: part of a pages account reserved at once for many runs (a Loom
  expansion's worst case, `admit`): its runs draw their reservations from the hold, so
  once admitted they never meet a refusal; what is left is released when it ends.

The rules, one function each:

- reserve: the SQL function `weft_reserve` (migration completions 0003) creates the
  month rows, locks every account in account order (two callers never deadlock),
  computes how many tokens per choice fit against the tightest account — the only
  place that rule is written (PL/pgSQL: it must hold under the lock, and every caller
  asks it, so Python never guesses it before the lock) — and adds the reservation to
  every account, in one statement. `reserve` (a page run), `admit` (many runs at once,
  a hold or a check), `reserve_request_sql` (a /v1 request, with its metadata row).
- charge: `charge` — what a run that ended is charged, from what the backend reported
  (`reported`, validated by `count`) or what was received, however it ended; never more
  than was reserved (`capped`).
- settle: `settle` (a run: a Generation, inside the caller's transaction) and
  `settle_request_sql` (an ApiRequest, exactly once, the released case included).
- release: `release_request_sql` (a request whose process died) and `close_hold`.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from completions.models import BudgetMonth, DailyUsage, TokenBudget
from completions.schema import MAX_OUTPUT_WORK, CompletionParams

PAGES, API, KEY, HOLD = "pages", "api", "key", "hold"
MONTHS = "completions_budgetmonth"
REQUESTS = "api_apirequest"  # the API's metadata rows (api.models.ApiRequest), by name
assert BudgetMonth._meta.db_table == MONTHS


class BudgetRefused(Exception):
    """The run's worst case does not fit in what is left of this month's budget."""

    code = "budget_refused"

    def __init__(self, asked: int, left: int, max_tokens_fit: int, fit: int | None = None) -> None:
        self.asked = asked
        self.left = left
        self.max_tokens_fit = max_tokens_fit
        self.fit = max_tokens_fit if fit is None else fit  # per choice, before output-work
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


def pages_account(user_id: int) -> str:
    return f"{PAGES}:{user_id}"


def api_account(user_id: int) -> str:
    return f"{API}:{user_id}"


def key_account(key_id: int) -> str:
    return f"{KEY}:{key_id}"


def hold_account(name: str) -> str:
    return f"{HOLD}:{name}"


@dataclass(frozen=True)
class Account:
    name: str  # one of the names above
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
    return [Account(pages_account(_id(user)), monthly_budget(user))]


def api_accounts(user_id: int, key_id: int, key_budget: int, allowance: int) -> list[Account]:
    return [Account(api_account(user_id), allowance), Account(key_account(key_id), key_budget)]


def accounts_of(owner_id: int, key: Any | None) -> list[Account]:
    """The accounts a run draws on: a page run the owner's pages budget; an API job the
    owner's API allowance and its key's cap."""
    if key is None:
        return pages_accounts(owner_id)
    return api_accounts(owner_id, key.pk, key.budget_tokens(), api_allowance(owner_id))


def account_names(owner_id: int, key_id: int | None) -> list[str]:
    if key_id is None:
        return [pages_account(owner_id)]
    return [api_account(owner_id), key_account(key_id)]


# --- what a run is charged -----------------------------------------------------------------


def count(value: Any) -> int | None:
    """A token count as the backend reported it, if it is one (a bool, a string or
    2**80 is not: such usage is ignored and the run charged by what was counted)."""
    return value if type(value) is int and 0 <= value <= 2**31 else None


def reported(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) of a usage object the backend sent, when both are counts;
    None for no usage, a malformed one, or our own estimate (`estimated`)."""
    if not isinstance(usage, dict) or not usage or usage.get("estimated"):
        return None
    prompt, completion = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
    return None if prompt is None or completion is None else (prompt, completion)


def counts(usage: Any) -> tuple[int, int]:
    """(prompt, completion) as a stored usage shows them, 0 for what is not a count."""
    usage = usage if isinstance(usage, dict) else {}
    return count(usage.get("prompt_tokens")) or 0, count(usage.get("completion_tokens")) or 0


class End(StrEnum):
    """How a run ended, as far as its charge is concerned."""

    RECEIVED = "received"  # streamed, cut or failed: what arrived is what was made
    ANSWERED = "answered"  # a whole JSON answer: without usage, every token asked for
    HUNG_UP = "hung_up"  # a JSON answer that never arrived (the client left, a cancel)


@dataclass(frozen=True)
class Charge:
    prompt_tokens: int
    completion_tokens: int
    charged: int  # what the ledger takes: never more than was reserved


NOTHING = Charge(0, 0, 0)


def capped(reserved: int, used: int) -> int:
    """Never more than was reserved (a run reserved nothing is charged nothing)."""
    return min(reserved, used) if reserved else 0


def charge(
    reserved: int,
    *,
    usage: Any,
    prompt_tokens: int,
    received: int = 0,
    max_tokens: int = 0,
    choices: int = 1,
    end: End = End.RECEIVED,
    elapsed: float = 0.0,
    prompt_alone: bool = True,
) -> Charge:
    """The one charging rule, for every path. The backend's usage when it reported one;
    else by how the run ended: what was received; a whole JSON answer, the prompt and
    every token asked for (the most it can have been); an answer that never arrived,
    the prompt and what the backend can have made meanwhile at WEFT_API_DECODE_RATE.
    `prompt_alone`: whether a run that made nothing still pays its prompt (the API's
    rule: the backend read it) or nothing (a page run's)."""
    counts = reported(usage)
    if counts is not None:
        prompt, completion = counts
    elif end == End.ANSWERED:
        prompt, completion = prompt_tokens, max(0, max_tokens) * max(1, choices)
    elif end == End.HUNG_UP:
        made = math.ceil(max(0.0, elapsed) * settings.WEFT_API_DECODE_RATE)
        prompt, completion = prompt_tokens, min(max(0, max_tokens), made) * max(1, choices)
    else:
        prompt, completion = prompt_tokens, max(0, received)
        if not completion and not prompt_alone:
            prompt = 0
    return Charge(prompt, completion, capped(reserved, prompt + completion))


# --- reserving: the rule applied under the lock --------------------------------------------


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


def suggested_max_tokens(fit: int, choice_count: int) -> int:
    """What a refusal suggests: the fit, within the output-work rule (a larger value
    would be refused by validation, not by the budget)."""
    return max(0, min(fit, MAX_OUTPUT_WORK // max(1, choice_count)))


def _in_transaction(what: str) -> None:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError(f"{what}() must run inside transaction.atomic()")


def _weft_reserve(user: Any, month: dt.date, prompt: int, choices: int, max_tokens: int):
    params = reserve_params(
        pages_accounts(user), user_id=_id(user), month=month, prompt_tokens=prompt,
        choices=choices, max_tokens=max_tokens, clamp=False,
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(RESERVE_SQL, params)
        fit, left = cursor.fetchone()
    return fit, left


def reserve(
    user: Any, asked: int, *, prompt_tokens: int, choice_count: int, hold: str | None = None
) -> dt.date:
    """Reserve a page run's worst case (`asked` = prompt + choices × max_tokens) on the
    user's pages account or raise BudgetRefused; returns the month it is in. With
    `hold`, drawn from that hold (`admit`) while it has room — nothing is locked or
    refused then — else from the account. Must run inside transaction.atomic(): the
    account stays locked until the caller commits, so the run row that owns the
    reservation is created under the same lock."""
    _in_transaction("reserve")
    if hold is not None:
        month = _draw(hold, asked)
        if month is not None:
            return month
    month = month_of()
    per_choice = max(0, asked - prompt_tokens) // max(1, choice_count)
    fit, left = _weft_reserve(user, month, prompt_tokens, choice_count, per_choice)
    if fit < per_choice or left < asked:
        raise BudgetRefused(asked, left, suggested_max_tokens(fit, choice_count))
    return month


@dataclass(frozen=True)
class Admission:
    month: dt.date
    left: int  # what was left before it
    fit: int  # max_tokens per choice that fit (capped at what was asked)


def admit(
    user: Any,
    *,
    prompt_tokens: int,
    choices: int,
    max_tokens: int,
    hold: str | None = None,
) -> Admission:
    """Admit many runs at once by their worst case together — `prompt_tokens` (all
    their prompts) + `choices` (all their choices) × `max_tokens` — under the pages
    account's lock, or raise BudgetRefused. With `hold`, the whole worst case stays
    reserved as that hold, which the runs then draw on (`reserve(..., hold=)`): the
    admission is reserved whole or refused whole, however many start at once. Without,
    a check under the lock that reserves nothing (a Batch: its prompts reserve one by one
    as they are fed, and pause when other runs spent the budget meanwhile)."""
    _in_transaction("admit")
    month = month_of()
    asked = prompt_tokens + max(1, choices) * max_tokens
    with transaction.atomic():  # a savepoint: a check gives back what it reserved
        fit, left = _weft_reserve(user, month, prompt_tokens, choices, max_tokens)
        admitted = fit >= max_tokens and left >= asked
        if admitted and hold is not None:
            BudgetMonth.objects.create(
                account=hold_account(hold), user_id=_id(user), month=month, reserved=asked
            )
        elif admitted:
            transaction.set_rollback(True)
    if not admitted:
        raise BudgetRefused(asked, left, suggested_max_tokens(fit, choices), fit)
    return Admission(month, left, fit)


DRAW_SQL = (
    f"UPDATE {MONTHS} SET reserved = reserved - %(asked)s "  # noqa: S608 - our names
    "WHERE account = %(hold)s AND reserved >= %(asked)s RETURNING month"
)


def _draw(hold: str, asked: int) -> dt.date | None:
    with connection.cursor() as cursor:
        cursor.execute(DRAW_SQL, {"hold": hold_account(hold), "asked": asked})
        found = cursor.fetchone()
    return found[0] if found else None


def close_hold(name: str) -> None:
    """Release what is left of a hold (its runs keep their own reservations and settle
    them). Safe to repeat: a closed hold is gone."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {MONTHS} WHERE account = %s RETURNING user_id, month, reserved",  # noqa: S608
            [hold_account(name)],
        )
        found = cursor.fetchone()
        if found is not None:
            user_id, month, left = found
            cursor.execute(SETTLE_SQL, {"reserved": left, "charged": 0, "month": month,
                                        "accounts": [pages_account(user_id)]})  # fmt: skip


# --- settling ---------------------------------------------------------------------------


SETTLE_SQL = (
    f"UPDATE {MONTHS} SET reserved = reserved - %(reserved)s, "  # noqa: S608 - our names
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
    """Replace a run's reservation by actual usage (capped), inside the caller's
    transaction; returns the tokens charged. Page runs also count in the user's daily
    usage (the Usage page)."""
    charged = capped(reserved, prompt_tokens + completion_tokens)
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


# --- a /v1 request's statements (run by api.ledger, on its async pool) ----------------------

# One statement (one round trip, autocommit): weft_reserve locks the user's allowance
# and the key's cap, reserves what fits (all of it, or with `clamp` as many tokens per
# choice as fit, at least one), and the request's row is inserted only if it reserved.
# Its fit and what was left come back either way.
RESERVE_REQUEST = """
WITH r AS (SELECT fit, left_tokens FROM weft_reserve(
    %(accounts)s, %(budgets)s, %(user)s, %(month)s, %(prompt)s, %(choices)s,
    %(max_tokens)s, %(clamp)s)),
ins AS (
    INSERT INTO {requests} ({columns}, reserved_tokens)
    SELECT {values}, %(prompt)s + %(choices)s * r.fit FROM r WHERE r.fit >= %(need)s
)
SELECT fit, left_tokens FROM r
"""


def reserve_request_sql(
    row: dict[str, Any],
    accounts: list[Account],
    *,
    user_id: int,
    month: dt.date,
    prompt_tokens: int,
    choices: int,
    max_tokens: int,
    tentative: bool,
) -> tuple[str, dict[str, Any], int]:
    """The statement reserving a request's worst case with its metadata `row` (column:
    value); returns (sql, params, need): reserved when the fit it returns is ≥ need. A
    `tentative` one (prompt_tokens only a bound) reserves the whole or nothing."""
    names = [n for n in row if n != "reserved_tokens"]
    sql = RESERVE_REQUEST.format(
        requests=REQUESTS, columns=", ".join(names), values=", ".join(f"%({n})s" for n in names)
    )
    need = max_tokens if tentative else 1
    params = {
        **{n: row[n] for n in names},
        **reserve_params(
            accounts, user_id=user_id, month=month, prompt_tokens=prompt_tokens,
            choices=choices, max_tokens=max_tokens, clamp=not tentative,
        ),
        "need": need,
    }  # fmt: skip
    return sql, params, need


def reserved_for(prompt_tokens: int, choices: int, fit: int) -> int:
    """What a request reserved, from weft_reserve's fit (the same sum as its SQL)."""
    return prompt_tokens + max(1, choices) * fit


# Once only: a row not settled (its reservation is subtracted), or one the dead-process
# sweep released while it was in fact still running (its Redis lease was lost: only the
# charge is added).
SETTLE_REQUEST = """
WITH old AS (
    SELECT id, settled, released_at IS NOT NULL AS released, reserved_tokens, budget_month
    FROM {requests} WHERE request_id = %(request_id)s FOR UPDATE
), s AS (
    UPDATE {requests} a SET settled = true, released_at = NULL, {sets}
    FROM old WHERE a.id = old.id AND (NOT old.settled OR old.released)
    RETURNING old.released, old.reserved_tokens, old.budget_month
)
UPDATE {months} m
SET reserved = m.reserved - CASE WHEN s.released THEN 0 ELSE s.reserved_tokens END,
    used = m.used + %(charged)s
FROM s WHERE m.month = s.budget_month AND m.account = ANY(%(accounts)s)
"""


def settle_request_sql(
    request_id: str,
    fields: dict[str, Any],
    *,
    user_id: int,
    key_id: int,
    reserved: int,
    prompt_tokens: int,
    completion_tokens: int,
) -> tuple[str, dict[str, Any], int]:
    """The statement that settles a request exactly once and finishes its row with
    `fields` (column: value); returns (sql, params, charged)."""
    charged = capped(reserved, prompt_tokens + completion_tokens)
    fields = {**fields, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    sets = ", ".join(f"{n} = %({n})s" for n in fields)
    sql = SETTLE_REQUEST.format(requests=REQUESTS, months=MONTHS, sets=sets)
    params = {**fields, "request_id": request_id, "charged": charged,
              "accounts": account_names(user_id, key_id)}  # fmt: skip
    return sql, params, charged


# A job's submission: its reservation becomes the job's (its worker settles it), so the
# request's row holds none and no sweep of the web process gives it back.
HAND_OVER_REQUEST = f"""
UPDATE {REQUESTS} SET settled = true, status = 202
WHERE request_id = %(request_id)s AND NOT settled
RETURNING id, reserved_tokens, budget_month
"""  # noqa: S608 - our names


@dataclass(frozen=True)
class HandedOver:
    id: int  # the request's row
    reserved: int
    month: dt.date


def hand_over_request(request_id: str) -> HandedOver | None:
    """Take an unsettled request's reservation for a run made of it (inside the
    transaction that creates the run); None when it was handed over (or settled)."""
    with connection.cursor() as cursor:
        cursor.execute(HAND_OVER_REQUEST, {"request_id": request_id})
        found = cursor.fetchone()
    return HandedOver(*found) if found is not None else None


def run_usage(run: Any, *, prompt_tokens: int | None = None, **how: Any) -> dict[str, int]:
    """A run's usage by the charging rule, worked out by the code that ran it (an API
    job's executor) and stored with the run, which lifecycle.finish then settles.
    `how`: charge()'s usage / end / elapsed / received."""
    params = CompletionParams.model_validate(run.params)
    prompt = run.prompt_tokens if prompt_tokens is None else prompt_tokens
    used = charge(
        run.reserved_tokens, prompt_tokens=prompt, choices=params.choice_count,
        max_tokens=params.max_tokens or 0, **{"usage": None, **how},
    )  # fmt: skip
    return {"prompt_tokens": used.prompt_tokens, "completion_tokens": used.completion_tokens}


UNSETTLED_REQUESTS = f"""
SELECT id, request_id, user_id, key_id FROM {REQUESTS}
WHERE NOT settled AND key_id IS NOT NULL AND created_at < %(before)s
"""  # noqa: S608 - our names

# Given back, nothing charged (what it generated is unknown); marked released, so a
# settle arriving later (the request ran on: its lease was lost, not its process) still
# charges what was used.
RELEASE_REQUEST = f"""
WITH r AS (
    UPDATE {REQUESTS} SET settled = true, released_at = %(now)s, finished_at = %(now)s,
        error_code = CASE WHEN error_code = '' THEN 'process_lost' ELSE error_code END
    WHERE id = %(id)s AND NOT settled
    RETURNING reserved_tokens, budget_month
), m AS (
    UPDATE {MONTHS} b SET reserved = b.reserved - r.reserved_tokens FROM r
    WHERE b.month = r.budget_month AND b.account = ANY(%(accounts)s)
    RETURNING 1
)
SELECT count(*) FROM r
"""  # noqa: S608 - our names


@dataclass(frozen=True)
class Unsettled:
    id: int
    request_id: str
    user_id: int | None
    key_id: int


def unsettled_requests(before: dt.datetime) -> list[Unsettled]:
    """Requests still holding a reservation, made before `before`."""
    with connection.cursor() as cursor:
        cursor.execute(UNSETTLED_REQUESTS, {"before": before})
        return [Unsettled(*row) for row in cursor.fetchall()]


def release_request(row: Unsettled) -> bool:
    """Give back an unsettled request's reservation (once); whether this call did."""
    accounts = account_names(row.user_id, row.key_id) if row.user_id is not None else []
    with connection.cursor() as cursor:
        cursor.execute(RELEASE_REQUEST, {"id": row.id, "now": timezone.now(), "accounts": accounts})
        return bool(cursor.fetchone()[0])


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
    return summary(Account(api_account(_id(user)), api_allowance(user)), month)


def key_summary(key: Any, month: dt.date | None = None) -> dict[str, int]:
    """One key's month against its own cap; `remaining` is what it can still use, so
    also bounded by what is left of its user's allowance."""
    own = summary(Account(key_account(key.pk), key.budget_tokens()), month)
    shared = api_summary(key.user_id, month)
    return {**own, "remaining": min(own["remaining"], shared["remaining"])}


def daily_breakdown(user: Any, month: dt.date | None = None) -> list[DailyUsage]:
    month = month or month_of()
    end = next_reset(dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)).date()
    return list(DailyUsage.objects.filter(user=user, day__gte=month, day__lt=end).order_by("day"))
