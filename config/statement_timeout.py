"""A statement timeout for the web process only.

A query that never ends (a recursive walk over a corrupted tree, a pathological
search) would hold a web thread and a connection forever. The web process sets
Postgres's statement_timeout on every connection it opens; the Celery worker,
beat and migrations never load middleware, so their long statements (a big
settle, a migration) are not cut."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.backends.signals import connection_created
from django.http import HttpRequest, HttpResponse


def _set_timeout(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor != "postgresql":
        return
    ms = int(settings.WEFT_WEB_STATEMENT_TIMEOUT * 1000)
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, false)", [f"{ms}ms"])


class StatementTimeoutMiddleware:
    """Loaded once per web process: from then on each new database connection
    of this process carries the timeout (no query per request)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        if settings.WEFT_WEB_STATEMENT_TIMEOUT > 0:
            connection_created.connect(_set_timeout, dispatch_uid="weft-statement-timeout")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)
