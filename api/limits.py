"""Per-key and per-person request limits in Redis, so they hold across every web process.

Per key: at most WEFT_API_MAX_ACTIVE requests running, at most WEFT_API_MAX_WAITING more
waiting their turn in arrival order (beyond: 429 queue_full), at most
WEFT_API_RATE_PER_MINUTE request starts in any 60 s (beyond: 429 rate_limited). Per
person — every key of one user together — the same three again (WEFT_API_USER_MAX_ACTIVE,
_MAX_WAITING, _RATE_PER_MINUTE): more keys never buy more of them. Both are decided in
the one script call of each attempt, so the person's limits add no round trip.

Every slot is a lease with an expiry, not a counter: a running request renews its lease,
a waiting one renews its place each time it polls, and a process that dies simply stops
renewing, so its slots free themselves — nothing leaks. One Lua script does the whole
decision atomically, with Redis' own clock, so processes on several machines agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from django.conf import settings
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError

from api import batching
from api.errors import ApiError

log = logging.getLogger(__name__)

RATE_WINDOW_MS = 60_000
Turn = Callable[[], contextlib.AbstractAsyncContextManager[None]]

# KEYS: the key's active, waiting (score = ticket), waiting leases (score = expiry),
# starts, tickets; then the same five of its person (every key of the user together).
# ARGV: request id, key's max active, max waiting, lease ms, wait lease ms, rate max,
# first call, person's max active, max waiting, rate max.
# A request goes when it is among the first the key has room for AND among the first
# its person has room for; it waits (and starts counting) in both queues or in neither.
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rid = ARGV[1]
local max_active = {tonumber(ARGV[2]), tonumber(ARGV[8])}
local max_waiting = {tonumber(ARGV[3]), tonumber(ARGV[9])}
local lease = tonumber(ARGV[4])
local wait_lease = tonumber(ARGV[5])
local rate_max = {tonumber(ARGV[6]), tonumber(ARGV[10])}
local scope = {'key', 'user'}
local window = 60000
local base = {0, 5}
for s = 1, 2 do
  local b = base[s]
  redis.call('ZREMRANGEBYSCORE', KEYS[b + 1], '-inf', now)
  local dead = redis.call('ZRANGEBYSCORE', KEYS[b + 3], '-inf', now)
  for _, w in ipairs(dead) do
    redis.call('ZREM', KEYS[b + 2], w)
    redis.call('ZREM', KEYS[b + 3], w)
  end
end
local function keep()
  local ttl = math.max(lease, wait_lease, window) * 2
  for i = 1, 10 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
if ARGV[7] == '1' then
  for s = 1, 2 do
    local starts = KEYS[base[s] + 4]
    redis.call('ZREMRANGEBYSCORE', starts, '-inf', now - window)
    if redis.call('ZCARD', starts) >= rate_max[s] then
      local oldest = redis.call('ZRANGE', starts, 0, 0, 'WITHSCORES')
      return {'rate_limited', tonumber(oldest[2]) + window - now, scope[s]}
    end
  end
  redis.call('ZADD', KEYS[4], now, rid)
  redis.call('ZADD', KEYS[9], now, rid)
end
local active = {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[6])}
local function go()
  for s = 1, 2 do
    local b = base[s]
    redis.call('ZREM', KEYS[b + 2], rid)
    redis.call('ZREM', KEYS[b + 3], rid)
    redis.call('ZADD', KEYS[b + 1], now + lease, rid)
  end
  keep()
  return {'go', 0, ''}
end
local rank = {redis.call('ZRANK', KEYS[2], rid), redis.call('ZRANK', KEYS[7], rid)}
if not rank[1] and not rank[2] then
  local waiting = {redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[7])}
  if active[1] < max_active[1] and waiting[1] == 0
      and active[2] < max_active[2] and waiting[2] == 0 then
    return go()
  end
  for s = 1, 2 do
    if waiting[s] >= max_waiting[s] then
      keep()
      return {'queue_full', 0, scope[s]}
    end
  end
end
local ready = true
for s = 1, 2 do
  local b = base[s]
  if not rank[s] then  -- (a place lost in one queue only is taken again, at its end)
    redis.call('ZADD', KEYS[b + 2], redis.call('INCR', KEYS[b + 5]), rid)
    rank[s] = redis.call('ZCARD', KEYS[b + 2]) - 1
  end
  if rank[s] >= max_active[s] - active[s] then ready = false end
end
if ready then return go() end
redis.call('ZADD', KEYS[3], now + wait_lease, rid)
redis.call('ZADD', KEYS[8], now + wait_lease, rid)
keep()
return {'wait', 0, ''}
"""

# KEYS: the key's and the person's active; ARGV: request id, lease ms — renew only a
# lease still held, and keep the sets themselves alive as long as any request in them
# is (ACQUIRE's PEXPIRE may be old).
RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local renewed = 0
for i = 1, #KEYS do
  renewed = renewed + redis.call('ZADD', KEYS[i], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[i], math.max(tonumber(ARGV[2]), 60000) * 2)
end
return renewed
"""


# KEYS: active, waiting, waiting leases (the key's, then the person's); ARGV: request id
# — one round trip, atomic.
RELEASE = """
for i = 1, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 0
"""


@dataclass(frozen=True)
class Limits:
    max_active: int
    max_waiting: int
    rate_per_minute: int
    lease_seconds: float
    wait_lease_seconds: float
    # The same for the person, every key of theirs together (api.quotas: the defaults)
    user_max_active: int
    user_max_waiting: int
    user_rate_per_minute: int

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            settings.WEFT_API_MAX_ACTIVE,
            settings.WEFT_API_MAX_WAITING,
            settings.WEFT_API_RATE_PER_MINUTE,
            settings.WEFT_API_LEASE_SECONDS,
            max(1.0, settings.WEFT_API_LEASE_SECONDS / 3),
            settings.WEFT_API_USER_MAX_ACTIVE,
            settings.WEFT_API_USER_MAX_WAITING,
            settings.WEFT_API_USER_RATE_PER_MINUTE,
        )


_clients: dict[int, tuple[aioredis.Redis, Any, Any, Any]] = {}


def _redis() -> tuple[aioredis.Redis, Any, Any, Any]:
    """One client (its own connection pool) and its scripts (sent by SHA) per event loop."""
    loop = id(asyncio.get_running_loop())
    found = _clients.get(loop)
    if found is None:
        # One immediate retry on a new connection when the pooled one is found closed (a
        # Redis restart leaves every pooled connection dead: without it, each one's next
        # request was a 500). A script cut before Redis ran it runs once; one whose answer
        # was lost can hold a place until its lease expires, no longer.
        retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
        client = aioredis.Redis.from_url(settings.REDIS_URL, retry=retry, socket_timeout=5)
        acquire, renew, release = (client.register_script(s) for s in (ACQUIRE, RENEW, RELEASE))
        found = (client, acquire, renew, release)
        _clients[loop] = found
    return found


async def close_client() -> None:
    batching.forget("limits")
    found = _clients.pop(id(asyncio.get_running_loop()), None)
    if found is not None:
        await found[0].aclose()


def redis_client() -> aioredis.Redis:
    return _redis()[0]


def active_key(key_id: int) -> str:
    """The Redis sorted set of a key's active requests (member: request id, score: the
    lease's expiry in ms)."""
    return _keys(key_id)[0]


def _keys(key_id: int) -> list[str]:
    return _sets(f"weft:api:limits:{key_id}")


def user_keys(user_id: int) -> list[str]:
    """The person's sets (active, waiting, waiting leases, starts, tickets): every key
    of the user counts in them too."""
    return _sets(f"weft:api:limits:user:{user_id}")


def _sets(base: str) -> list[str]:
    return [f"{base}:active", f"{base}:waiting", f"{base}:wait-leases", f"{base}:starts",
            f"{base}:tickets"]  # fmt: skip


# --- scripts of concurrent requests, sent together (api.batching) ------------------------


async def _scripts(batch: list[batching.Call]) -> list[Any]:
    """Each call's (script, keys, args) run; its result, or the exception it raised. Every
    script runs atomically on its own in Redis, in the batch's order: sent together, they
    decide exactly as they would one by one."""
    if len(batch) == 1:
        script, keys, args = batch[0].payload
        return [await script(keys=keys, args=args)]
    pipe = _redis()[0].pipeline(transaction=False)
    for call in batch:
        script, keys, args = call.payload
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    outcomes = await pipe.execute(raise_on_error=False)
    for at, (call, outcome) in enumerate(zip(batch, outcomes, strict=True)):
        if isinstance(outcome, NoScriptError):  # a restarted Redis: the script loads again
            script, keys, args = call.payload
            try:
                outcomes[at] = await script(keys=keys, args=args)
            except Exception as exc:
                outcomes[at] = exc
    return outcomes


async def _script(
    payload: tuple[Any, list[str], list[Any]],
    *,
    urgent: bool,
    orphaned: Callable[[Any], None] | None = None,
) -> Any:
    call = batching.Call(payload, orphaned=orphaned)
    return await batching.batcher("limits", _scripts).run(call, urgent=urgent)


class Slot:
    """A held place among the key's (and its person's) active requests; renews its
    lease until released."""

    def __init__(self, key_id: int, user_id: int, request_id: str, limits: Limits) -> None:
        self.keys = _keys(key_id) + user_keys(user_id)
        self.request_id = request_id
        self.limits = limits
        self._renewer: asyncio.Task | None = None

    async def _renew_forever(self) -> None:
        renew = _redis()[2]
        lease_ms = int(self.limits.lease_seconds * 1000)
        while True:
            await asyncio.sleep(self.limits.lease_seconds / 3)
            try:
                await renew(keys=self.actives, args=[self.request_id, lease_ms])
            except Exception as exc:  # a Redis hiccup must not break the response
                log.warning("api limits: lease renewal failed: %s", type(exc).__name__)

    @property
    def actives(self) -> list[str]:
        return [self.keys[0], self.keys[5]]

    @property
    def places(self) -> list[str]:
        """Active, waiting and waiting leases: the key's, then the person's."""
        return [*self.keys[:3], *self.keys[5:8]]

    def start_renewing(self) -> None:
        self._renewer = asyncio.create_task(self._renew_forever())

    async def release(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        await _script((_redis()[3], self.places, [self.request_id]), urgent=False)

    def release_later(self, _verdict: Any = None) -> None:
        """Give the place back from outside the request (its caller was cancelled)."""
        task = asyncio.ensure_future(_release_quietly(self))
        _releasing.add(task)
        task.add_done_callback(_releasing.discard)


_releasing: set[asyncio.Future] = set()


async def _acquire(slot: Slot, limits: Limits, turn: Turn | None) -> None:
    acquire = _redis()[1]
    lease, wait_lease = int(limits.lease_seconds * 1000), int(limits.wait_lease_seconds * 1000)
    head = [slot.request_id, limits.max_active, limits.max_waiting, lease, wait_lease,
            limits.rate_per_minute]  # fmt: skip
    person = [limits.user_max_active, limits.user_max_waiting, limits.user_rate_per_minute]
    first = "1"
    pause = 0.005
    while True:
        async with turn() if turn is not None else contextlib.nullcontext():
            # A caller cancelled meanwhile leaves no place taken: it is given back.
            payload = (acquire, slot.keys, [*head, first, *person])
            verdict, wait_ms, scope = await _script(
                payload, urgent=True, orphaned=slot.release_later
            )
        verdict = verdict.decode() if isinstance(verdict, bytes) else verdict
        if verdict == "go":
            return
        if verdict in ("rate_limited", "queue_full"):
            raise refusal(verdict, limits, _text(scope), int(wait_ms))
        first = "0"
        await asyncio.sleep(pause)
        pause = min(0.05, pause * 1.5)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def refusal(code: str, limits: Limits, scope: str, wait_ms: int) -> ApiError:
    """The 429 of a limit reached, by the key or by its person (all their keys)."""
    if scope == "user":
        who = "your keys together"
        rate, active, waiting = (limits.user_rate_per_minute, limits.user_max_active,
                                 limits.user_max_waiting)  # fmt: skip
    else:
        who = "this key"
        rate, active, waiting = limits.rate_per_minute, limits.max_active, limits.max_waiting
    if code == "rate_limited":
        return ApiError(
            "rate_limited",
            f"{who} started {rate} requests in the last minute",
            retry_after=max(1.0, wait_ms / 1000),
        )
    have = "have" if scope == "user" else "has"
    return ApiError(
        "queue_full",
        f"{who} {have} {active} active and {waiting} waiting requests; retry shortly",
        retry_after=1,
    )


@contextlib.asynccontextmanager
async def slot_for(
    key_id: int, request_id: str, turn: Turn | None = None, *, user_id: int
) -> AsyncIterator[Slot]:
    """Wait (in order) for one of the key's active slots and one of its person's (the
    key's user: all their keys share the person's); raise ApiError queue_full /
    rate_limited. Leaving the block — normally, by error or by cancellation (the client
    went away) — gives the place back. `turn`, if given, is taken for each call to
    Redis (api.turns), never while waiting between them."""
    limits = Limits.from_settings()
    slot = Slot(key_id, user_id, request_id, limits)
    try:
        await _acquire(slot, limits, turn)
        slot.start_renewing()
        yield slot
    finally:
        # Shielded: a cancelled request must still free its place promptly.
        await asyncio.shield(_release_quietly(slot))


async def _release_quietly(slot: Slot) -> None:
    try:
        await slot.release()
    except Exception as exc:  # the lease expires on its own anyway
        log.warning("api limits: release failed: %s", type(exc).__name__)
