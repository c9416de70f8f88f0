"""The WebSocket base every Weft consumer extends.

Every socket holds a lease in Redis for each cap it counts against (the user's
sockets, and whatever a subclass adds: a tree's), so the caps hold across every web
process; a lease is renewed while the socket lives and expires on its own when the
process that held it dies. Every socket also joins its user's group and its session's,
so a deactivation or a logout closes it, whichever process it is in."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
import weakref
from typing import Any, NamedTuple

import redis
import redis.asyncio as aioredis
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

log = logging.getLogger(__name__)

LIMIT_CLOSE = 4429  # too many sockets; 4xxx: neither the ws extension nor loomlive.js reconnects
GONE_CLOSE = 4401  # logged out or deactivated
TOO_MANY = (
    "Live updates are off on this page: you have too many pages open{where}. "
    "Close some, then reload this one."
)

_redis: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
    weakref.WeakKeyDictionary()
)


def socket_redis() -> aioredis.Redis:
    """One pool per event loop (a server has one; its connections belong to it)."""
    loop = asyncio.get_running_loop()
    client = _redis.get(loop)
    if client is None:
        client = _redis[loop] = aioredis.Redis.from_url(settings.REDIS_URL)
    return client


class Cap(NamedTuple):
    key: str  # a Redis sorted set: socket -> the time its lease ends
    limit: int
    where: str  # for the refusal: "" or " on this tree"


# Atomically: drop expired leases, refuse if any cap is full (its 1-based index), else
# take a lease in every one. KEYS: the caps; ARGV: now, lease end, socket, ttl, limits.
_ACQUIRE = """
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1])
  if not redis.call('ZSCORE', key, ARGV[3]) and
     redis.call('ZCARD', key) >= tonumber(ARGV[4 + i]) then
    return i
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, ARGV[2], ARGV[3])
  redis.call('EXPIRE', key, ARGV[4])
end
return 0
"""


def user_cap(user_id: int) -> Cap:
    return Cap(f"weft:ws:user:{user_id}", settings.WEFT_WS_PER_USER, "")


def _ttl() -> int:
    """Seconds a cap's set outlives its last lease (whole: EXPIRE takes no fraction)."""
    return math.ceil(settings.WEFT_WS_LEASE_SECONDS * 2)


async def acquire(caps: list[Cap], member: str) -> Cap | None:
    """A lease in every cap for `member`, or the first cap that is full (nothing taken)."""
    if not caps:
        return None
    lease = settings.WEFT_WS_LEASE_SECONDS
    now = time.time()
    full = await socket_redis().eval(
        _ACQUIRE, len(caps), *[c.key for c in caps],
        now, now + lease, member, _ttl(), *[c.limit for c in caps],
    )  # fmt: skip
    return caps[int(full) - 1] if full else None


async def renew(caps: list[Cap], member: str) -> None:
    lease = settings.WEFT_WS_LEASE_SECONDS
    async with socket_redis().pipeline(transaction=False) as pipe:
        for cap in caps:
            pipe.zadd(cap.key, {member: time.time() + lease}, xx=True)
            pipe.expire(cap.key, _ttl())
        await pipe.execute()


async def release(caps: list[Cap], member: str) -> None:
    async with socket_redis().pipeline(transaction=False) as pipe:
        for cap in caps:
            pipe.zrem(cap.key, member)
        await pipe.execute()


def user_group(user_id: int) -> str:
    return f"weft-user-{user_id}"


def session_group(session_key: str) -> str:
    # Not the key itself: a group name is stored in Redis in the clear.
    return "weft-session-" + hashlib.sha256(session_key.encode()).hexdigest()[:40]


class OwnerConsumer(AsyncJsonWebsocketConsumer):
    """Refuses anonymous sockets, then asks the subclass whether this user may
    watch the object named in the URL; a refused socket is closed before it is
    accepted (the browser sees HTTP 403), so nothing is ever sent to it. A socket over
    a cap is accepted, told why (`notice`) and closed with LIMIT_CLOSE."""

    groups_to_join: list[str] = []

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        if self.user is None or not self.user.is_authenticated:
            await self.close()
            return
        groups = await self.authorize()
        if not groups:
            await self.close()
            return
        self.caps = [user_cap(self.user.pk), *self.more_caps()]
        try:
            full = await acquire(self.caps, self.channel_name)
        except redis.RedisError as exc:
            # Redis away or just restarted: a cap that cannot be counted must not turn
            # the socket into a 500; this one goes uncounted, the next is counted again.
            log.warning("%s: socket caps not counted: %s", type(self).__name__, type(exc).__name__)
            self.caps, full = [], None
        if full is not None:
            self.caps = []
            log.info("%s: user %s refused, %s full", type(self).__name__, self.user.pk, full.key)
            await self.accept()
            await self.notice(TOO_MANY.format(where=full.where))
            await self.close(code=LIMIT_CLOSE)
            return
        self.joined = [*groups, user_group(self.user.pk)]
        session_key = getattr(self.scope.get("session"), "session_key", None)
        if session_key:
            self.joined.append(session_group(session_key))
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        self.renewing = asyncio.ensure_future(self._keep_lease())
        await self.accept()
        await self.on_accepted()

    async def _keep_lease(self) -> None:
        every = settings.WEFT_WS_LEASE_SECONDS / 3
        while True:
            await asyncio.sleep(every)
            try:
                await renew(self.caps, self.channel_name)
                await self.on_heartbeat()
            except Exception:  # Redis away a moment: the next beat tries again
                log.warning("%s: lease not renewed", type(self).__name__)

    async def send(self, text_data=None, bytes_data=None, close=False) -> None:
        """A group message can arrive while the browser is closing the socket: the
        handler reads the database, and by the time it sends, the server has no socket
        left (uvicorn raises RuntimeError; other servers an OSError). Nobody is there
        to read it, so it is dropped instead of logged as a crash of the consumer."""
        try:
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
        except (RuntimeError, OSError) as exc:
            log.debug("%s: socket already closed, message dropped (%s)", type(self).__name__, exc)

    async def disconnect(self, code: int) -> None:
        renewing = getattr(self, "renewing", None)
        if renewing is not None:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await renewing
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = []
        if getattr(self, "caps", None):
            try:
                await release(self.caps, self.channel_name)
            except Exception:  # the lease then expires on its own
                log.warning("%s: lease not released", type(self).__name__)
            self.caps = []

    async def end(self, message: str, code: int) -> None:
        """Tell the page why, leave every group (nothing more reaches this socket) and
        close it."""
        self.ended = True
        await self.notice(message)
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = []
        await self.close(code=code)

    async def user_gone(self, event: dict) -> None:
        """The user was deactivated (or deleted)."""
        await self.end("Your account is no longer active.", GONE_CLOSE)

    async def session_ended(self, event: dict) -> None:
        """This socket's session logged out."""
        await self.end("You have signed out.", GONE_CLOSE)

    async def authorize(self) -> list[str]:
        """Return the channel-layer groups to join, or [] to refuse."""
        raise NotImplementedError

    def more_caps(self) -> list[Cap]:
        """Caps beside the user's that this socket counts against."""
        return []

    async def notice(self, message: str) -> None:
        """Tell the page, in its own format, why its socket is closing."""

    async def on_accepted(self) -> None:
        """Hook for sending an initial state after the socket is accepted."""

    async def on_heartbeat(self) -> None:
        """Hook run every third of a lease while the socket lives."""


def announce_logout(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    """user_logged_out: the sockets of that session close (its other sessions' stay)."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        _publish(session_group(key), {"type": "session.ended"})


def announce_deactivation(sender: Any, instance: Any, **kwargs: Any) -> None:
    """post_save of a user: an inactive user's sockets close."""
    if not instance.is_active:
        announce_deletion(sender, instance)


def announce_deletion(sender: Any, instance: Any, **kwargs: Any) -> None:
    """post_delete of a user (and a deactivation): their sockets close once it commits."""
    from django.db import transaction

    group = user_group(instance.pk)
    transaction.on_commit(lambda: _publish(group, {"type": "user.gone"}))


def connect_signals() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.signals import user_logged_out
    from django.db.models.signals import post_delete, post_save

    user_logged_out.connect(announce_logout, dispatch_uid="weft-ws-logout")
    post_save.connect(announce_deactivation, sender=get_user_model(), dispatch_uid="weft-ws-off")
    post_delete.connect(announce_deletion, sender=get_user_model(), dispatch_uid="weft-ws-gone")


# The door's publisher (completions.streaming.publish_soon: on the process's publisher
# loop, safe from any thread), set by completions/apps.py: core imports no app.
_PUBLISHER: list[Any] = []


def register_publisher(publish: Any) -> None:
    _PUBLISHER[:] = [publish]


def _publish(group: str, message: dict) -> None:
    _PUBLISHER[0](group, message)


class PingConsumer(OwnerConsumer):
    """A per-user socket the layout uses to show whether live updates work."""

    async def authorize(self) -> list[str]:
        return [ping_group(self.user.pk)]

    async def ping_message(self, event: dict) -> None:
        await self.send(text_data=event["text"])


def ping_group(user_id: int) -> str:
    return f"ping-{user_id}"
