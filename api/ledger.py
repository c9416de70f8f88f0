"""The /v1 proxy's transport to the one ledger: completions.budget's statements (reserve
the worst case, clamp, settle) run from the ASGI event loop. No rule is written here.

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
from django.db import connections
from django.utils import timezone
from psycopg.pq import TransactionStatus

from api import batching
from api.errors import ApiError
from api.limits import active_key
from api.models import ApiRequest
from completions import budget, lifecycle, registry
from completions.budget import month_of, next_reset

log = logging.getLogger(__name__)

REQUESTS = "api_apirequest"
assert ApiRequest._meta.db_table == REQUESTS == budget.REQUESTS
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
    columns = {name: full[name] for name in full if name in _COLUMNS}
    sql, params, need = budget.reserve_request_sql(
        columns, accounts, user_id=user_id, month=month, prompt_tokens=prompt_tokens,
        choices=choices, max_tokens=max_tokens, tentative=tentative,
    )  # fmt: skip
    made = Reservation(row["request_id"], user_id, key_id, month, 0, max_tokens, False)
    statement = _Statement(sql, params, fetch=True)
    orphaned = partial(_orphaned, made, need)
    fit, left = await _run(user_id, statement, urgent=True, orphaned=orphaned)
    if fit < need:
        if tentative:
            return None
        raise budget_exceeded(left, prompt_tokens)
    made.reserved = budget.reserved_for(prompt_tokens, choices, fit)
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


async def settle(
    res: Reservation, prompt_tokens: int, completion_tokens: int, **fields: Any
) -> int:
    """Replace the reservation by what was used (completions.budget's rule) and finish
    the request's row, exactly once, in one statement; returns the tokens charged."""
    columns = {name: value for name, value in fields.items() if name in _COLUMNS}
    sql, params, charged = budget.settle_request_sql(
        res.request_id, columns, user_id=res.user_id, key_id=res.key_id, reserved=res.reserved,
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
    )  # fmt: skip
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


# --- which requests still have a live process (for lifecycle's release sweep) -------------


def leases_alive(requests: list[tuple[int, str]]) -> set[str]:
    """The request ids whose lease in Redis (api.limits) is still renewed."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        seconds, micros = client.time()
        now_ms = seconds * 1000 + micros // 1000
        alive = set()
        for key_id, request_id in requests:
            lease = client.zscore(active_key(key_id), request_id)
            if lease is not None and lease > now_ms:
                alive.add(request_id)
        return alive
    finally:
        client.close()


registry.register_lease_check(leases_alive)


def release_stale() -> int:
    """The door's sweep (completions.lifecycle.release_lost_requests)."""
    return lifecycle.release_lost_requests()
