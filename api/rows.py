"""The metadata row every /v1 request leaves (api.ApiRequest: ids, route, timing; never
any text), as the proxy and the harvest build it."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from api import ledger
from api.http import Request


def request_row(req: Request, key: Any, endpoint: str, **fields: Any) -> dict[str, Any]:
    """The row of `req`, made with `key` on `endpoint`, as it starts."""
    return ledger.request_row(
        request_id=req.id,
        key_id=key.pk,
        key_prefix=key.prefix,
        user_id=key.user_id,
        ip=req.ip,
        endpoint=endpoint,
        workload=req.workload,
        created_at=req.created_at,
        **fields,
    )


def finished_row(req: Request, key: Any, endpoint: str) -> dict[str, Any]:
    """The row of a request that has been answered: its status and latency."""
    return {
        **request_row(req, key, endpoint),
        "status": req.status,
        "latency_ms": req.latency_ms(),
        "finished_at": timezone.now(),
    }
