"""The /v1 proxy's side of the one ledger (completions.budget): reserve the worst case,
clamp, settle — from the ASGI event loop.

A request reserves its worst case (prompt tokens + choices × max_tokens) on its user's
API allowance and its key's cap together, with the ledger's own statement
(`weft_reserve`, which locks both accounts), before anything is sent, and the
reservation is replaced by actual use when it ends — so concurrent requests, over any
number of keys and web processes, can never overshoot. Unlike the pages, the API
clamps: when max_tokens does not fit what is left, it is reduced to what does.

The proxy runs in the ASGI event loop, so this module talks to Postgres with psycopg's
async connections from a small per-loop pool (Django's async ORM would hop to a
thread for every query). The rows are the Django models BudgetMonth / ApiRequest; the
synchronous readers below use the ORM.

Concurrent requests' statements travel together (api.batching): what arrives while a
batch is out goes in the next one, sent as one pipeline, run as one transaction — one
round trip and one commit for a burst's worth of reservations instead of one each.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import psycopg
import redis
from django.conf import settings
from django.db import connections, transaction
from django.db.models import F
from django.utils import timezone
from psycopg.pq import TransactionStatus

from api import batching
from api.errors import ApiError
from api.limits import active_key
from api.models import ApiRequest
from completions import budget
from completions.budget import month_of, next_reset
from completions.models import BudgetMonth

log = logging.getLogger(__name__)

MONTHS = "completions_budgetmonth"
REQUESTS = "api_apirequest"
assert BudgetMonth._meta.db_table == MONTHS and ApiRequest._meta.db_table == REQUESTS
POOL_MAX = 24
POOL_IDLE = POOL_MAX  # a burst's connections stay for the next: connecting costs more than a query

# --- an async connection pool, one per event loop ---------------------------------------


def _connect_params() -> dict[str, Any]:
    params = dict(connections["default"].get_connection_params())
    for sync_only in ("cursor_factory", "context"):
        params.pop(sync_only, None)
    # The few statements here run on every request: prepare them once per connection.
    params["prepare_threshold"] = 0
    return params


class _Pool:
    def __init__(self) -> None:
        self.idle: list[psycopg.AsyncConnection] = []
        self.params = _connect_params()
        # Each statement is short; a burst waits for a connection rather than opening
        # one per request (several web processes share Postgres' max_connections).
        self.slots = asyncio.Semaphore(POOL_MAX)

    async def drop_idle(self) -> None:
        while self.idle:
            with contextlib.suppress(Exception):
                await self.idle.pop().close()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        async with self.slots, self._connection() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        conn = None
        while self.idle and conn is None:
            candidate = self.idle.pop()
            conn = None if candidate.closed else candidate
        if conn is None:
            conn = await psycopg.AsyncConnection.connect(**self.params, autocommit=True)
        try:
            yield conn
        finally:
            # Back to the pool only when idle: a connection left mid-transaction (a
            # cancelled request) or broken is closed instead.
            idle = not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
            if idle and len(self.idle) < POOL_IDLE:
                self.idle.append(conn)
            else:
                await conn.close()


_pools: dict[int, _Pool] = {}


def _pool() -> _Pool:
    loop = id(asyncio.get_running_loop())
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = _Pool()
    return pool


async def close_pool() -> None:
    batching.forget("ledger")
    pool = _pools.pop(id(asyncio.get_running_loop()), None)
    while pool is not None and pool.idle:
        await pool.idle.pop().close()


# --- statements of concurrent requests, sent together (api.batching) ---------------------
#
# A batch is one pipeline on one connection in autocommit mode: one implicit
# transaction, committed at its end, so all of it is or none of it is. When it fails,
# each of its statements runs again on its own. Running one again is safe because each
# is once-only by itself: a request's row is inserted under its unique request_id, and a
# settle applies only to a row not yet settled. Month rows are locked in key order in
# every batch (Call.order; the sort is stable, so a key's requests keep their arrival
# order), so two web processes' batches cannot deadlock.


@dataclass(frozen=True)
class _Statement:
    sql: str
    params: Any
    fetch: bool  # its first row is its result (else None)


async def _outcomes(batch: list[batching.Call]) -> list[Any]:
    """Each statement's result, or the exception it raised."""
    if len(batch) > 1:
        try:
            return await _pipelined([call.payload for call in batch])
        except Exception:  # nothing of it was committed: each again, on its own
            pass
    outcomes: list[Any] = []
    for call in batch:
        try:
            outcomes.append(await _alone(call.payload))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


async def _pipelined(statements: list[_Statement]) -> list[Any]:
    async def once() -> list[Any]:
        async with _pool().connection() as conn:
            async with conn.pipeline():
                cursors = [await conn.execute(each.sql, each.params) for each in statements]
            pairs = zip(statements, cursors, strict=True)
            return [await cur.fetchone() if each.fetch else None for each, cur in pairs]

    return await _live(once)


async def _alone(statement: _Statement) -> Any:
    async def once() -> Any:
        async with _pool().connection() as conn:
            cur = await conn.execute(statement.sql, statement.params)
            return await cur.fetchone() if statement.fetch else None

    return await _live(once)


async def _live[T](once: Callable[[], Awaitable[T]]) -> T:
    """Run once; if the connection was dead (Postgres restarted: every idle one is, then),
    drop the idle ones and run again on a new connection. Each statement here is
    once-only by itself, so running it again is safe."""
    try:
        return await once()
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        log.warning("api ledger: database connection lost (%s); reconnecting", type(exc).__name__)
        await _pool().drop_idle()
        return await once()


async def _run(
    user_id: int,
    statement: _Statement,
    *,
    urgent: bool = False,
    orphaned: Callable[[Any], None] | None = None,
) -> Any:
    # In user order: every statement locks accounts of one user only, so batches that
    # take users in the same order can never deadlock.
    call = batching.Call(statement, order=user_id, orphaned=orphaned)
    return await batching.batcher("ledger", _outcomes).run(call, urgent=urgent)


# --- reserve and settle ------------------------------------------------------------------


@dataclass
class Reservation:
    request_id: str
    user_id: int
    key_id: int
    month: dt.date
    reserved: int
    max_tokens: int  # what may be generated per choice (clamped or not)
    clamped: bool


def budget_exceeded(left: int, prompt_tokens: int) -> ApiError:
    reset = next_reset()
    return ApiError(
        "budget_exceeded",
        f"this key has {left:,} tokens left this month (within its own budget and the "
        f"allowance its user's keys share); the prompt alone needs "
        f"{prompt_tokens:,} and at least one generated token must fit. The budget resets "
        f"on {reset:%Y-%m-%d} 00:00 UTC.",
        retry_after=max(1.0, (reset - timezone.now()).total_seconds()),
        left=left,
    )


# One statement (one round trip, autocommit): the ledger's weft_reserve locks the user's
# allowance and the key's cap, reserves what fits (all of it, or with `clamp` as many
# tokens per choice as fit, at least one), and the request's row is inserted only if it
# reserved. Its fit and what was left come back either way.
RESERVE = """
WITH r AS (SELECT fit, left_tokens FROM weft_reserve(
    %(accounts)s, %(budgets)s, %(user)s, %(month)s, %(prompt)s, %(choices)s,
    %(max_tokens)s, %(clamp)s)),
ins AS (
    INSERT INTO api_apirequest ({columns}, reserved_tokens)
    SELECT {values}, %(prompt)s + %(choices)s * r.fit FROM r WHERE r.fit >= %(need)s
)
SELECT fit, left_tokens FROM r
"""


async def reserve(
    row: dict[str, Any],
    *,
    user_id: int,
    key_id: int,
    key_budget: int,
    allowance: int,
    prompt_tokens: int,
    choices: int,
    max_tokens: int,
    tentative: bool = False,
) -> Reservation | None:
    """Reserve prompt_tokens + choices × max_tokens, or as much of it as fits (max_tokens
    reduced), and insert the request's metadata row with it. Raises ApiError
    budget_exceeded when not even one token per choice fits. `tentative` (prompt_tokens
    is only a bound): reserve only the whole, else nothing and return None, so the caller
    can count exactly and ask again."""
    month = month_of()
    accounts = budget.api_accounts(user_id, key_id, key_budget, allowance)
    full = {**row, "budget_month": month, "settled": False}
    names = [name for name in full if name in _COLUMNS and name != "reserved_tokens"]
    sql = RESERVE.format(columns=", ".join(names), values=", ".join(f"%({n})s" for n in names))
    params = {
        **{n: full[n] for n in names},
        **budget.reserve_params(
            accounts, user_id=user_id, month=month, prompt_tokens=prompt_tokens,
            choices=choices, max_tokens=max_tokens, clamp=not tentative,
        ),
        "need": max_tokens if tentative else 1,
    }  # fmt: skip
    made = Reservation(row["request_id"], user_id, key_id, month, 0, max_tokens, False)
    statement = _Statement(sql, params, fetch=True)
    need = params["need"]
    orphaned = partial(_orphaned, made, need)
    fit, left = await _run(user_id, statement, urgent=True, orphaned=orphaned)
    if fit < need:
        if tentative:
            return None
        raise budget_exceeded(left, prompt_tokens)
    made.reserved = prompt_tokens + max(1, choices) * fit
    made.max_tokens = fit
    made.clamped = fit < max_tokens
    return made


def _orphaned(res: Reservation, need: int, made: Any) -> None:
    """A reservation made for a request that was cancelled meanwhile (its client gone):
    nothing will be generated under it, so it is given back at once."""
    if made is not None and made[0] >= need:
        later(settle(res, 0, 0, status=499, error_code="client_closed", finished_at=timezone.now()))


_later: set[asyncio.Future] = set()


def later(write: Any) -> None:
    """Run a ledger write off the response path; a failure is logged (its type only)."""
    task = asyncio.ensure_future(_logged(write))
    _later.add(task)
    task.add_done_callback(_later.discard)


async def _logged(write: Any) -> None:
    try:
        await write
    except Exception as exc:
        log.error("api ledger write failed: %s", type(exc).__name__)


# Once only: a row not settled (its reservation is subtracted), or one the dead-process
# sweep released while it was in fact still running (its Redis lease was lost: only the
# charge is added). The two accounts are the ones weft_reserve drew on.
SETTLE = """
WITH old AS (
    SELECT id, settled, released_at IS NOT NULL AS released, reserved_tokens, user_id,
        key_id, budget_month
    FROM api_apirequest WHERE request_id = %(request_id)s FOR UPDATE
), s AS (
    UPDATE api_apirequest a SET settled = true, released_at = NULL, {sets}
    FROM old WHERE a.id = old.id AND (NOT old.settled OR old.released)
    RETURNING old.released, old.reserved_tokens, old.user_id, old.key_id, old.budget_month
)
UPDATE completions_budgetmonth m
SET reserved = m.reserved - CASE WHEN s.released THEN 0 ELSE s.reserved_tokens END,
    used = m.used + LEAST(s.reserved_tokens, %(used)s)
FROM s WHERE m.month = s.budget_month
    AND m.account IN ('api:' || s.user_id, 'key:' || s.key_id)
"""


async def settle(
    res: Reservation, prompt_tokens: int, completion_tokens: int, **fields: Any
) -> int:
    """Replace the reservation by what was used (never more than was reserved) and
    finish the request's row, exactly once, in one statement; returns the tokens charged."""
    charged = min(res.reserved, prompt_tokens + completion_tokens)
    fields = {**fields, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    names = [name for name in fields if name in _COLUMNS]
    sql = SETTLE.format(sets=", ".join(f"{n} = %({n})s" for n in names))
    params = {**{n: fields[n] for n in names}, "request_id": res.request_id,
              "used": prompt_tokens + completion_tokens}  # fmt: skip
    await _run(res.user_id, _Statement(sql, params, fetch=False))
    return charged


_COLUMNS = {f.column for f in ApiRequest._meta.concrete_fields} - {"id"}


def _row_values(row: dict[str, Any]) -> tuple[list[str], list[Any]]:
    names = [name for name in row if name in _COLUMNS]
    return names, [row[name] for name in names]


def _insert_sql(names: list[str]) -> str:
    columns = ", ".join(names)
    marks = ", ".join(["%s"] * len(names))
    return f"INSERT INTO {REQUESTS} ({columns}) VALUES ({marks})"  # noqa: S608 - names are ours


async def record(row: dict[str, Any]) -> None:
    """The metadata row of a request that reserved nothing (refused, invalid, a listing).
    A row already there is left alone: a request cancelled while its reservation was
    being made has that row, settled by _orphaned."""
    names, values = _row_values({**row, "settled": True})
    sql = f"{_insert_sql(names)} ON CONFLICT (request_id) DO NOTHING"
    await _run(row.get("user_id") or 0, _Statement(sql, values, fetch=False))


def request_row(**fields: Any) -> dict[str, Any]:
    """Defaults for every NOT NULL column a metadata row needs."""
    return {
        "key_prefix": "",
        "model": "",
        "served_model": "",
        "workload": "",
        "stream": False,
        "status": 0,
        "error_code": "",
        "clamped": "",
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "reserved_tokens": 0,
        "settled": True,
        "created_at": timezone.now(),
        **fields,
    }


# --- reservations whose process died ------------------------------------------------------


def release_stale() -> int:
    """Give back the reservations of requests whose web process died before settling.
    A request in flight holds a lease in Redis (api.limits) that it renews; a row still
    unsettled well past a lease's life, whose lease is gone, has no process left to
    settle it. What it generated is unknown, so nothing is charged now; but a lease can
    also be lost while its request runs on (Redis restarted, a long stall), so the row is
    marked released, and a settle that arrives later still charges what was used.
    Returns how many."""
    grace = dt.timedelta(seconds=2 * settings.WEFT_API_LEASE_SECONDS + 5)
    candidates = ApiRequest.objects.filter(settled=False, created_at__lt=timezone.now() - grace)
    client = redis.Redis.from_url(settings.REDIS_URL)
    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    released = 0
    for row in candidates.only("pk", "key_id", "request_id").iterator():
        if row.key_id is None:  # unauthenticated: nothing was reserved
            continue
        lease = client.zscore(active_key(row.key_id), row.request_id)
        if lease is not None and lease > now_ms:
            continue  # still running somewhere
        with transaction.atomic():
            locked = ApiRequest.objects.select_for_update().get(pk=row.pk)
            if locked.settled:
                continue
            if locked.budget_month is not None and locked.user_id is not None:
                BudgetMonth.objects.filter(
                    account__in=budget.account_names(locked.user_id, locked.key_id),
                    month=locked.budget_month,
                ).update(reserved=F("reserved") - locked.reserved_tokens)
            locked.settled = True
            locked.released_at = timezone.now()
            locked.error_code = locked.error_code or "process_lost"
            locked.finished_at = locked.released_at
            locked.save(update_fields=["settled", "released_at", "error_code", "finished_at"])
            released += 1
    client.close()
    if released:
        log.warning("api: released %d reservations of requests whose process died", released)
    return released
