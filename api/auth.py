"""Bearer-key authentication for /v1, with a short in-process cache.

A key lookup is a database query; the cache keeps recent keys for
WEFT_API_KEY_CACHE_SECONDS, so a revoked key (or a changed budget) takes effect within
that bound in every process. Unknown secrets are never cached: a key made a moment ago
must work at once. The cache is keyed by the secret's SHA-256, never the secret.
"""

from __future__ import annotations

import asyncio
import time

from django.conf import settings
from django.utils import timezone

from api.errors import ApiError
from api.models import TOUCH_EVERY, ApiKey, hash_secret

_cache: dict[str, tuple[float, ApiKey]] = {}
_touching: dict[int, asyncio.Task] = {}
CACHE_MAX = 10_000


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
    if hit is not None and now - hit[0] < settings.WEFT_API_KEY_CACHE_SECONDS:
        key = hit[1]
    else:
        key = await ApiKey.objects.aauthenticate(secret)
        if key is None:
            _cache.pop(digest, None)
            raise ApiError("invalid_api_key", "this API key is unknown or revoked")
        if len(_cache) >= CACHE_MAX:
            _cache.clear()
        _cache[digest] = (now, key)
    _touch_soon(key)
    return key


def _touch_soon(key: ApiKey) -> None:
    """last_used_at, written at most once a minute, off the request's path."""
    if key.last_used_at is not None and timezone.now() - key.last_used_at < TOUCH_EVERY:
        return
    if key.pk in _touching:
        return
    task = asyncio.create_task(key.atouch())
    _touching[key.pk] = task
    task.add_done_callback(lambda _: _touching.pop(key.pk, None))


def forget() -> None:
    _cache.clear()
