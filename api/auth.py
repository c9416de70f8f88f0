"""Bearer-key authentication for /v1, with a short in-process cache.

A key lookup is a database query; the cache keeps recent keys for
WEFT_API_KEY_CACHE_SECONDS, so a revoked key (or a changed budget) takes effect within
that bound in every process. Unknown secrets are never cached: a key made a moment ago
must work at once. The cache is keyed by the secret's SHA-256, never the secret.

A burst of requests with one key makes one lookup, not one each: concurrent misses
wait for the same query, and an entry in its last fifth is looked up again in the
background while it still answers, so a busy key never waits for the database (and
no entry answers past its WEFT_API_KEY_CACHE_SECONDS).
"""

from __future__ import annotations

import asyncio
import time
from functools import partial

from django.conf import settings
from django.utils import timezone

from api import db
from api.errors import ApiError
from api.models import TOUCH_EVERY, ApiKey, hash_secret
from core import logs

_cache: dict[str, tuple[float, ApiKey]] = {}
_touching: dict[int, asyncio.Task] = {}
_looking: dict[str, asyncio.Task] = {}  # secret digest -> the lookup in flight
CACHE_MAX = 10_000
REFRESH_AHEAD = 0.8  # of the cache's lifetime


def bearer(headers: dict[str, str]) -> str:
    value = headers.get("authorization")
    if value is None:
        raise ApiError(
            "missing_api_key",
            "send your key as `Authorization: Bearer <key>` (create one on the API keys page)",
        )
    scheme, _, secret = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise ApiError("invalid_api_key", "the Authorization header must be `Bearer <key>`")
    return secret.strip()


async def authenticate(headers: dict[str, str]) -> ApiKey:
    """The live key of this request, or ApiError 401."""
    secret = bearer(headers)
    digest = hash_secret(secret)
    now = time.monotonic()
    hit = _cache.get(digest)
    key: ApiKey | None
    life = settings.WEFT_API_KEY_CACHE_SECONDS
    if hit is not None and now - hit[0] < life:
        key = hit[1]
        if now - hit[0] >= REFRESH_AHEAD * life:
            _lookup(secret, digest)
    else:
        # Shielded: one waiter cancelled (its client gone) must not cancel the others'.
        key = await asyncio.shield(_lookup(secret, digest))
        if key is None:
            raise ApiError("invalid_api_key", "this API key is unknown or revoked")
    _touch_soon(key)
    logs.bind(key_prefix=key.prefix, user_id=key.user_id)
    return key


def _lookup(secret: str, digest: str) -> asyncio.Task:
    """The one lookup of this secret in flight on this loop, started if there is none."""
    task = _looking.get(digest)
    if task is None or task.get_loop() is not asyncio.get_running_loop():
        task = asyncio.ensure_future(_fetch(secret, digest))
        _looking[digest] = task
        task.add_done_callback(partial(_looked, digest))
    return task


def _looked(digest: str, task: asyncio.Task) -> None:
    if _looking.get(digest) is task:
        del _looking[digest]
    if not task.cancelled():
        task.exception()  # a refresh nobody awaits: its failure is the next request's


async def _fetch(secret: str, digest: str) -> ApiKey | None:
    started = time.monotonic()  # the entry's age counts from before the query
    key = await db.run(ApiKey.objects.authenticate, secret)
    if key is None:
        _cache.pop(digest, None)
        return None
    if len(_cache) >= CACHE_MAX:
        _cache.clear()
    _cache[digest] = (started, key)
    return key


def _touch_soon(key: ApiKey) -> None:
    """last_used_at, written at most once a minute, off the request's path."""
    if key.last_used_at is not None and timezone.now() - key.last_used_at < TOUCH_EVERY:
        return
    if key.pk in _touching:
        return
    task = asyncio.create_task(db.run(key.touch))
    _touching[key.pk] = task
    task.add_done_callback(lambda _: _touching.pop(key.pk, None))


def forget() -> None:
    _cache.clear()
    _looking.clear()
