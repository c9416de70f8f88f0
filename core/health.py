"""State of every service Weft needs, for readiness (/health/ready, which `make run`
waits for)."""

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from config.env import without_credentials

log = logging.getLogger(__name__)


def check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def check_broker() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    finally:
        client.close()


def check_channel_layer() -> None:
    async def round_trip() -> None:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.send(channel, {"type": "health.ping"})
        await asyncio.wait_for(layer.receive(channel), timeout=2)

    async_to_sync(round_trip)()


# The door adds "backend" (completions/apps.py): core imports no app.
CHECKS: dict[str, Callable[[], None]] = {
    "database": check_database,
    "broker": check_broker,
    "channel_layer": check_channel_layer,
}


def run_checks() -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for name, check in CHECKS.items():
        started = time.monotonic()
        try:
            check()
        except Exception as exc:  # every failure is a state to report, not a crash
            # /health is public: it says what is down; why (which may name hosts,
            # users or a URL's credentials) goes to the log, credentials removed.
            log.warning("health: %s is down: %s", name, without_credentials(repr(exc))[:500])
            results[name] = {"ok": False}
        else:
            results[name] = {"ok": True}
        results[name]["ms"] = round((time.monotonic() - started) * 1000, 1)
    return results


# Readiness is asked by probes, balancers and (it is public) anyone: one run of the
# checks answers every caller of this process for a few seconds, and callers who come
# while it runs wait for it rather than start their own. In process memory, not Redis:
# the answer is this process's own readiness, and it must not hang on Redis, one of
# the things it checks. A down answer is kept shorter, so a recovery shows soon.
UP_SECONDS, DOWN_SECONDS = 3.0, 1.0
_lock = threading.Lock()
_last: tuple[tuple[str, ...], float, dict[str, dict[str, Any]]] | None = None


def _configuration() -> tuple[str, ...]:
    """What the checks ask: an answer holds only for the settings it was found under."""
    db = settings.DATABASES["default"]
    return (str(db.get("NAME")), str(db.get("HOST")), settings.REDIS_URL,
            settings.WEFT_BACKEND_URL, repr(getattr(settings, "WEFT_BACKENDS", None)))  # fmt: skip


def cached_checks() -> dict[str, dict[str, Any]]:
    global _last
    with _lock:
        now, config = time.monotonic(), _configuration()
        if _last is not None and _last[0] == config:
            keep = UP_SECONDS if all(r["ok"] for r in _last[2].values()) else DOWN_SECONDS
            if now - _last[1] < keep:
                return _last[2]
        results = run_checks()
        _last = (config, time.monotonic(), results)
        return results
