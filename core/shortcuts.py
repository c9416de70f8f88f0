"""Small view helpers every app uses."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404
from django_htmx.middleware import HtmxDetails

from completions.models import Generation


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


def own_generation(request: HttpRequest, generation_id: int, *kinds: str) -> Generation:
    """The user's own generation (of one of `kinds`, when given). Anyone else's is a
    404, not a 403: ids are not to be probed."""
    generations = Generation.objects.filter(owner_id=request.user.pk).pages()
    if kinds:
        generations = generations.filter(kind__in=kinds)
    return get_object_or_404(generations, pk=generation_id)


def visible_generation(request: HttpRequest, generation_id: int) -> Generation:
    """The user's own generation, or one its kind lets them see (a Loom generation
    into a tree shared with them: completions.registry.register_watchers); else 404."""
    from completions.registry import may_watch

    generation = Generation.objects.pages().filter(pk=generation_id).first()
    if generation is None or not may_watch(request.user, generation):
        raise Http404("no such generation")
    return generation
