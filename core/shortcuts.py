"""Small view helpers every app uses. (The generation lookups by id are the door's:
completions/shortcuts.py.)"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxRequest(HttpRequest):
    """A request as Weft's views see it: django-htmx's middleware (always installed)
    has set `.htmx`, which django-stubs' HttpRequest does not know."""

    htmx: HtmxDetails


def int_or_404(value: Any) -> int:
    """A path or query id as an int; anything else ("abc", "", None, huge) is a 404,
    like a missing object. Capped at Postgres' bigint, so a lookup cannot overflow."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise Http404("not an id") from None
    if not -(2**63) <= number < 2**63:
        raise Http404("not an id")
    return number
