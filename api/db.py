"""Django's database from the /v1 path, which Django's request cycle never touches.

Views get a usable connection because Django closes a broken or obsolete one at every
request's start and end (close_old_connections). /v1 is served before Django, so here
every ORM call goes through `run`: in Django's own database thread, as its async ORM
does, and when the connection turns out to be dead (Postgres restarted, failed over,
or killed it), it is closed and the call made once more on a fresh one. Every call
made this way is safe to make twice: reads, and writes that are once-only by
themselves (a job is created once per request id).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, connection, connections

log = logging.getLogger(__name__)


def _fresh[T](fn: Callable[..., T], *args: Any) -> T:
    try:
        return fn(*args)
    except (OperationalError, InterfaceError) as exc:
        if connection.in_atomic_block:
            raise
        log.warning("api: database connection lost (%s); reconnecting", type(exc).__name__)
        connections.close_all()
        return fn(*args)


async def run[T](fn: Callable[..., T], *args: Any) -> T:
    """fn(*args) in Django's database thread, on a live connection."""
    return await sync_to_async(_fresh)(fn, *args)
