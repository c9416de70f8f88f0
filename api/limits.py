"""Per-key request limits in Redis, so they hold across every web process.

Per key: at most WEFT_API_MAX_ACTIVE requests running, at most WEFT_API_MAX_WAITING more
waiting their turn in arrival order (beyond: 429 queue_full), at most
WEFT_API_RATE_PER_MINUTE request starts in any 60 s (beyond: 429 rate_limited).

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

# KEYS: active, waiting (score = ticket), waiting leases (score = expiry), starts, tickets
# ARGV: request id, max active, max waiting, lease ms, wait lease ms, rate max, first call
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rid = ARGV[1]
local max_active = tonumber(ARGV[2])
local max_waiting = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local wait_lease = tonumber(ARGV[5])
local rate_max = tonumber(ARGV[6])
local window = 60000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, w in ipairs(dead) do
  redis.call('ZREM', KEYS[2], w)
  redis.call('ZREM', KEYS[3], w)
end
local function keep()
  local ttl = math.max(lease, wait_lease, window) * 2
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
if ARGV[7] == '1' then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - window)
  if redis.call('ZCARD', KEYS[4]) >= rate_max then
    local oldest = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
    return {'rate_limited', tonumber(oldest[2]) + window - now}
  end
  redis.call('ZADD', KEYS[4], now, rid)
end
local active = redis.call('ZCARD', KEYS[1])
local rank = redis.call('ZRANK', KEYS[2], rid)
if not rank then
  local waiting = redis.call('ZCARD', KEYS[2])
  if active < max_active and waiting == 0 then
    redis.call('ZADD', KEYS[1], now + lease, rid)
    keep()
    return {'go', 0}
  end
  if waiting >= max_waiting then
    keep()
    return {'queue_full', 0}
  end
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[5]), rid)
  redis.call('ZADD', KEYS[3], now + wait_lease, rid)
  keep()
  return {'wait', 0}
end
if rank < max_active - active then
  redis.call('ZREM', KEYS[2], rid)
  redis.call('ZREM', KEYS[3], rid)
  redis.call('ZADD', KEYS[1], now + lease, rid)
  keep()
  return {'go', 0}
end
redis.call('ZADD', KEYS[3], now + wait_lease, rid)
keep()
return {'wait', 0}
"""

# KEYS: active; ARGV: request id, lease ms — renew only a lease still held, and keep
# the set itself alive as long as any request in it is (ACQUIRE's PEXPIRE may be old).
RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local renewed = redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[2]), 60000) * 2)
return renewed
"""


# KEYS: active, waiting, waiting leases; ARGV: request id — one round trip, atomic.
RELEASE = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 0
"""


@dataclass(frozen=True)
class Limits:
    max_active: int
    max_waiting: int
    rate_per_minute: int
    lease_seconds: float
    wait_lease_seconds: float

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            settings.WEFT_API_MAX_ACTIVE,
            settings.WEFT_API_MAX_WAITING,
            settings.WEFT_API_RATE_PER_MINUTE,
            settings.WEFT_API_LEASE_SECONDS,
            max(1.0, settings.WEFT_API_LEASE_SECONDS / 3),
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
    base = f"weft:api:limits:{key_id}"
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
    """A held place among the key's active requests; renews its lease until released."""

    def __init__(self, key_id: int, request_id: str, limits: Limits) -> None:
        self.keys = _keys(key_id)
        self.request_id = request_id
        self.limits = limits
        self._renewer: asyncio.Task | None = None

    async def _renew_forever(self) -> None:
        renew = _redis()[2]
        lease_ms = int(self.limits.lease_seconds * 1000)
        while True:
            await asyncio.sleep(self.limits.lease_seconds / 3)
            try:
                await renew(keys=self.keys[:1], args=[self.request_id, lease_ms])
            except Exception as exc:  # a Redis hiccup must not break the response
                log.warning("api limits: lease renewal failed: %s", type(exc).__name__)

    def start_renewing(self) -> None:
        self._renewer = asyncio.create_task(self._renew_forever())

    async def release(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        await _script((_redis()[3], self.keys[:3], [self.request_id]), urgent=False)

    def release_later(self, _verdict: Any = None) -> None:
        """Give the place back from outside the request (its caller was cancelled)."""
        task = asyncio.ensure_future(_release_quietly(self))
        _releasing.add(task)
        task.add_done_callback(_releasing.discard)


_releasing: set[asyncio.Future] = set()


async def _acquire(slot: Slot, limits: Limits, turn: Turn | None) -> None:
    acquire = _redis()[1]
    args = [slot.request_id, limits.max_active, limits.max_waiting,
            int(limits.lease_seconds * 1000), int(limits.wait_lease_seconds * 1000),
            limits.rate_per_minute]  # fmt: skip
    first = "1"
    pause = 0.005
    while True:
        async with turn() if turn is not None else contextlib.nullcontext():
            # A caller cancelled meanwhile leaves no place taken: it is given back.
            payload = (acquire, slot.keys, [*args, first])
            verdict, wait_ms = await _script(payload, urgent=True, orphaned=slot.release_later)
        verdict = verdict.decode() if isinstance(verdict, bytes) else verdict
        if verdict == "go":
            return
        if verdict == "rate_limited":
            raise ApiError(
                "rate_limited",
                f"this key started {limits.rate_per_minute} requests in the last minute",
                retry_after=max(1.0, int(wait_ms) / 1000),
            )
        if verdict == "queue_full":
            raise ApiError(
                "queue_full",
                f"this key has {limits.max_active} active and {limits.max_waiting} waiting "
                "requests; retry shortly",
                retry_after=1,
            )
        first = "0"
        await asyncio.sleep(pause)
        pause = min(0.05, pause * 1.5)


@contextlib.asynccontextmanager
async def slot_for(key_id: int, request_id: str, turn: Turn | None = None) -> AsyncIterator[Slot]:
    """Wait (in order) for one of the key's active slots; raise ApiError queue_full /
    rate_limited. Leaving the block — normally, by error or by cancellation (the client
    went away) — gives the place back. `turn`, if given, is taken for each call to
    Redis (api.turns), never while waiting between them."""
    limits = Limits.from_settings()
    slot = Slot(key_id, request_id, limits)
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
