"""The Workbench's probability charts, built where a template already has the samples
(templates/workbench/_prob_chart.html), so the pages that show samples need no view
change to show their charts."""

from typing import Any

from django import template

from workbench import charts

register = template.Library()


@register.simple_tag
def sample_charts(samples: list, key: Any) -> list:
    return charts.sample_charts(samples, key)


@register.simple_tag
def pair_chart(pair: Any, a_key: Any, b_key: Any) -> Any:
    return charts.pair_chart(pair, a_key, b_key)
