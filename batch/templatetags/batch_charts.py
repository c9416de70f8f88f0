"""The Batch page's charts, built where the progress partial is rendered (the page,
and the socket's fragment on each finished prompt: batch/consumers.py), so neither
needs a change to carry them."""

from typing import Any

from django import template

from batch import charts

register = template.Library()


@register.simple_tag(takes_context=True)
def batch_charts(context: template.Context, batch: Any) -> dict[str, Any]:
    request = context.get("request")
    return charts.charts_for(batch, request.GET if request is not None else None)
