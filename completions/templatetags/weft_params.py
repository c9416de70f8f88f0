"""Template filters of the shared parameter form (completions.forms)."""

from __future__ import annotations

from typing import Any

from django import template

from completions.forms import StopWidget

register = template.Library()


@register.filter
def stop_slots(stop: Any) -> list[str]:
    """A stored stop (a string or a list) as the values of the stop_1 … stop_N inputs,
    escaped the one way every page unescapes them."""
    return StopWidget().decompress(stop)
