"""Per-key monthly token budgets for the API: reserve the worst case, clamp, settle.

Like the pages' budget (completions/budget.py) a request reserves its worst case
(prompt tokens + choices × max_tokens) under SELECT ... FOR UPDATE on the key's month
row before anything is sent, and the reservation is replaced by actual use when it ends
— so concurrent requests can never overshoot. Unlike the pages, the API clamps: when
max_tokens does not fit what is left, it is reduced to what does.

The proxy runs in the ASGI event loop, so this module talks to Postgres with psycopg's
async connections from a small per-loop pool (Django's async ORM would hop to a
thread for every query, and a transaction cannot span those hops). The rows are the
Django models ApiKeyMonth / ApiRequest; the synchronous readers below use the ORM.

Concurrent requests' statements travel together (api.batching): what arrives while a
batch is out goes in the next one, sent as one pipeline, run as one transaction — one
round trip and one commit for a burst's worth of reservations instead of one each.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import psycopg
import redis
from django.conf import settings
from django.db import connections, transaction
from django.db.models import F, Sum
from django.utils import timezone
from psycopg.pq import TransactionStatus

from api import batching
from api.errors import ApiError
from api.limits import active_key
from api.models import ApiKey, ApiKeyMonth, ApiRequest
from completions.budget import month_of, next_reset

log = logging.getLogger(__name__)

MONTHS = "api_apikeymonth"
REQUESTS = "api_apirequest"
assert ApiKeyMonth._meta.db_table == MONTHS and ApiRequest._meta.db_table == REQUESTS
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
    async with _pool().connection() as conn:
        async with conn.pipeline():
            cursors = [await conn.execute(each.sql, each.params) for each in statements]
        pairs = zip(statements, cursors, strict=True)
        return [await cur.fetchone() if each.fetch else None for each, cur in pairs]


async def _alone(statement: _Statement) -> Any:
    async with _pool().connection() as conn:
        cur = await conn.execute(statement.sql, statement.params)
        return await cur.fetchone() if statement.fetch else None


async def _run(
    key_id: int,
    statement: _Statement,
    *,
    urgent: bool = False,
    orphaned: Callable[[Any], None] | None = None,
) -> Any:
    call = batching.Call(statement, order=key_id, orphaned=orphaned)
    return await batching.batcher("ledger", _outcomes).run(call, urgent=urgent)


# --- reserve and settle ------------------------------------------------------------------


@dataclass
class Reservation:
    request_id: str
    key_id: int
    month: dt.date
    reserved: int
    max_tokens: int  # what may be generated per choice (clamped or not)
    clamped: bool


def max_tokens_fit(left: int, prompt_tokens: int, choices: int) -> int:
    return max(0, (left - prompt_tokens) // max(1, choices))


def budget_exceeded(left: int, prompt_tokens: int) -> ApiError:
    reset = next_reset()
    return ApiError(
        "budget_exceeded",
        f"this key has {left:,} tokens left this month; the prompt alone needs "
        f"{prompt_tokens:,} and at least one generated token must fit. The budget resets "
        f"on {reset:%Y-%m-%d} 00:00 UTC.",
        retry_after=max(1.0, (reset - timezone.now()).total_seconds()),
        left=left,
    )


# The fast path, one statement (one round trip, autocommit): the month row is created
# or locked by ON CONFLICT DO UPDATE, which sees its latest committed version, and is
# only updated WHERE the whole worst case fits; the request's row is inserted only if
# the reservation was. Anything else (a clamp, a refusal) takes the locked slow path.
FAST_RESERVE = """
WITH r AS (
    INSERT INTO api_apikeymonth AS m (key_id, month, used, reserved)
    VALUES (%(key_id)s, %(month)s, 0, %(asked)s)
    ON CONFLICT (key_id, month) DO UPDATE SET reserved = m.reserved + %(asked)s
    WHERE %(budget)s - m.used - m.reserved >= %(asked)s
    RETURNING m.id
)
INSERT INTO api_apirequest ({columns}) SELECT {values} FROM r RETURNING id
"""


async def reserve(
    row: dict[str, Any],
    *,
    key_id: int,
    budget: int,
    prompt_tokens: int,
    choices: int,
    max_tokens: int,
    tentative: bool = False,
) -> Reservation | None:
    """Reserve prompt_tokens + choices × max_tokens, or as much of it as fits (max_tokens
    reduced), and insert the request's metadata row with it. Raises ApiError
    budget_exceeded when not even one token per choice fits. `tentative` (prompt_tokens
    is only a bound): reserve nothing and return None instead of clamping or refusing,
    so the caller can count exactly and ask again."""
    month = month_of()
    asked = prompt_tokens + choices * max_tokens
    full = {**row, "reserved_tokens": asked, "budget_month": month, "settled": False}
    if asked <= budget:  # a new month row starts empty: then it fits
        names = [name for name in full if name in _COLUMNS]
        sql = FAST_RESERVE.format(
            columns=", ".join(names), values=", ".join(f"%({n})s" for n in names)
        )
        params = {**{n: full[n] for n in names}, "key_id": key_id, "month": month,
                  "asked": asked, "budget": budget}  # fmt: skip
        made = Reservation(row["request_id"], key_id, month, asked, max_tokens, False)
        statement = _Statement(sql, params, fetch=True)
        reserved = await _run(key_id, statement, urgent=True, orphaned=partial(_orphaned, made))
        if reserved is not None:
            return made
    async with _pool().connection() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO api_apikeymonth (key_id, month, used, reserved) "
            "VALUES (%s, %s, 0, 0) ON CONFLICT (key_id, month) DO NOTHING",
            (key_id, month),
        )
        cur = await conn.execute(
            "SELECT used, reserved FROM api_apikeymonth "
            "WHERE key_id = %s AND month = %s FOR UPDATE",
            (key_id, month),
        )
        month_row = await cur.fetchone()
        assert month_row is not None  # the INSERT … DO NOTHING above made sure of it
        used, reserved_now = month_row
        left = max(0, budget - used - reserved_now)
        fit = min(max_tokens, max_tokens_fit(left, prompt_tokens, choices))
        if tentative and fit < max_tokens:
            return None
        if fit < 1:
            raise budget_exceeded(left, prompt_tokens)
        asked = prompt_tokens + choices * fit
        await conn.execute(
            "UPDATE api_apikeymonth SET reserved = reserved + %s WHERE key_id = %s AND month = %s",
            (asked, key_id, month),
        )
        await _insert(conn, {**full, "reserved_tokens": asked})
    return Reservation(row["request_id"], key_id, month, asked, fit, fit < max_tokens)


def _orphaned(res: Reservation, made: Any) -> None:
    """A reservation made for a request that was cancelled meanwhile (its client gone):
    nothing will be generated under it, so it is given back at once."""
    if made is not None:
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


SETTLE = """
WITH s AS (
    UPDATE api_apirequest SET settled = true, {sets}
    WHERE request_id = %(request_id)s AND NOT settled
    RETURNING key_id, budget_month, reserved_tokens
)
UPDATE api_apikeymonth m SET reserved = m.reserved - s.reserved_tokens, used = m.used + %(charged)s
FROM s WHERE m.key_id = s.key_id AND m.month = s.budget_month
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
    params = {**{n: fields[n] for n in names}, "request_id": res.request_id, "charged": charged}
    await _run(res.key_id, _Statement(sql, params, fetch=False))
    return charged


_COLUMNS = {f.column for f in ApiRequest._meta.concrete_fields} - {"id"}


def _row_values(row: dict[str, Any]) -> tuple[list[str], list[Any]]:
    names = [name for name in row if name in _COLUMNS]
    return names, [row[name] for name in names]


def _insert_sql(names: list[str]) -> str:
    columns = ", ".join(names)
    marks = ", ".join(["%s"] * len(names))
    return f"INSERT INTO {REQUESTS} ({columns}) VALUES ({marks})"  # noqa: S608 - names are ours


async def _insert(conn: psycopg.AsyncConnection, row: dict[str, Any]) -> None:
    names, values = _row_values(row)
    await conn.execute(_insert_sql(names), values)


async def record(row: dict[str, Any]) -> None:
    """The metadata row of a request that reserved nothing (refused, invalid, a listing).
    A row already there is left alone: a request cancelled while its reservation was
    being made has that row, settled by _orphaned."""
    names, values = _row_values({**row, "settled": True})
    sql = f"{_insert_sql(names)} ON CONFLICT (request_id) DO NOTHING"
    await _run(row.get("key_id") or 0, _Statement(sql, values, fetch=False))


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


# --- readers (sync, for pages) -----------------------------------------------------------


def usage_summary(key: ApiKey, month: dt.date | None = None) -> dict[str, int]:
    """This month's tokens of one key: {budget, used, reserved, remaining}."""
    month = month or month_of()
    row = ApiKeyMonth.objects.filter(key=key, month=month).first()
    budget = key.budget_tokens()
    used = row.used if row else 0
    reserved = row.reserved if row else 0
    return {
        "budget": budget,
        "used": used,
        "reserved": reserved,
        "remaining": max(0, budget - used - reserved),
    }


def key_totals(key: ApiKey, month: dt.date | None = None) -> dict[str, int]:
    month = month or month_of()
    start = dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)
    rows = ApiRequest.objects.filter(
        key=key, created_at__gte=start, created_at__lt=next_reset(start)
    )
    totals = rows.aggregate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    return {
        "requests": rows.count(),
        "prompt_tokens": totals["prompt"] or 0,
        "completion_tokens": totals["completion"] or 0,
    }


RECENT_REQUESTS = 50


def usage_by_key(user: Any) -> list[dict[str, Any]]:
    """For the Usage page: each of the user's keys with this month's tokens and its most
    recent requests' metadata (never any text: the rows hold none)."""
    keys = ApiKey.objects.for_user(user).order_by("revoked_at", "-created_at")
    return [
        {
            "key": key,
            "summary": usage_summary(key),
            "requests": list(ApiRequest.objects.for_key(key)[:RECENT_REQUESTS]),
        }
        for key in keys
    ]


# --- reservations whose process died ------------------------------------------------------


def release_stale() -> int:
    """Give back the reservations of requests whose web process died before settling.
    A request in flight holds a lease in Redis (api.limits) that it renews; a row still
    unsettled well past a lease's life, whose lease is gone, has no process left to
    settle it. What it generated is unknown, so nothing is charged. Returns how many."""
    grace = dt.timedelta(seconds=2 * settings.WEFT_API_LEASE_SECONDS + 5)
    # A completion job's reservation waits for its worker, however long it is queued.
    candidates = ApiRequest.objects.filter(
        settled=False, created_at__lt=timezone.now() - grace, job__isnull=True
    )
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
            if locked.budget_month is not None:  # None: refused before any reservation
                ApiKeyMonth.objects.filter(key_id=locked.key_id, month=locked.budget_month).update(
                    reserved=F("reserved") - locked.reserved_tokens
                )
            locked.settled = True
            locked.error_code = locked.error_code or "process_lost"
            locked.finished_at = timezone.now()
            locked.save(update_fields=["settled", "error_code", "finished_at"])
            released += 1
    client.close()
    if released:
        log.warning("api: released %d reservations of requests whose process died", released)
    return released
