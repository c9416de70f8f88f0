"""{{ n|thousands }}: 1234567 → 1,234,567 (token counts and budgets read at a glance)."""

from typing import Any

from django import template

register = template.Library()


@register.filter
def thousands(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    return f"{value:,}"
