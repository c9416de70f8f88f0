"""The stored-results figure of the Usage page, wherever that page lives: one tag."""

from typing import Any

from django import template

from api import quotas

register = template.Library()


@register.inclusion_tag("api/_stored_results.html")
def stored_results(user: Any) -> dict[str, Any]:
    return {"stored": quotas.summary(user)}
