"""What the Usage page reads of the /v1 ledger: each key's month, from the door's
ledger (completions.budget) and the API's metadata rows (api.ApiRequest). Reads only:
the writes are the proxy's (api/ledger.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Sum

from api.models import ApiKey, ApiRequest
from completions import budget

RECENT_REQUESTS = 50


def key_totals(key: ApiKey, month: dt.date | None = None) -> dict[str, int]:
    month = month or budget.month_of()
    start = dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)
    rows = ApiRequest.objects.filter(
        key=key, created_at__gte=start, created_at__lt=budget.next_reset(start)
    )
    totals = rows.aggregate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    return {
        "requests": rows.count(),
        "prompt_tokens": totals["prompt"] or 0,
        "completion_tokens": totals["completion"] or 0,
    }


def usage_by_key(user: Any) -> list[dict[str, Any]]:
    """For the Usage page: each of the user's keys with this month's tokens and its most
    recent requests' metadata (never any text: the rows hold none)."""
    keys = ApiKey.objects.for_user(user).order_by("revoked_at", "-created_at")
    return [
        {
            "key": key,
            "summary": budget.key_summary(key),
            "requests": list(ApiRequest.objects.for_key(key)[:RECENT_REQUESTS]),
        }
        for key in keys
    ]
