"""State of every service Weft needs, for readiness (/health/ready, which `make run`
waits for)."""

import asyncio
import logging
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
