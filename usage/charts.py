"""The Usage page's charts (core/charts.py): tokens per day this month, stacked by
model, against the budget — the tokens left (burn-down) and an even pace to zero on
the month's last day — for the user's pages, for each API key, and for staff over
everyone (by user and by model).

Read from the rows that exist, with the ledgers' own readers for the totals
(completions.budget, usage.readers): a page run's day and model from its Generation
(kept 7 days; older page tokens are "model not kept", the difference to DailyUsage),
an API request's from its metadata row (api.ApiRequest, kept with the key)."""

from __future__ import annotations

import calendar
import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import F, Sum
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import TruncDate
from django.utils import timezone

from api.models import ApiKey, ApiRequest
from completions.budget import next_reset
from completions.models import DailyUsage, Generation
from core.charts import Chart, Mark, Series
from usage.readers import key_totals

NOT_KEPT = "model not kept (run older than 7 days)"
TOP_USERS = 7  # staff's chart names this many users; the rest are "others"

Cells = dict[tuple[dt.date, str], int]  # (day, model or user) -> tokens


def _days(month: dt.date) -> list[dt.date]:
    count = calendar.monthrange(month.year, month.month)[1]
    return [month.replace(day=d) for d in range(1, count + 1)]


def _span(month: dt.date) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)
    return start, next_reset(start)


def _today(month: dt.date) -> dt.date | None:
    today = timezone.now().astimezone(dt.UTC).date()
    return today if today.replace(day=1) == month else None


def _page_cells(month: dt.date, **owner: Any) -> Cells:
    """Page runs' charged tokens by settlement day and model."""
    start, end = _span(month)
    rows = (
        Generation.objects.filter(settled_at__gte=start, settled_at__lt=end, charged_tokens__gt=0, **owner)
        .annotate(day=TruncDate("settled_at", tzinfo=dt.UTC), model=KeyTextTransform("model", "params"))
        .values("day", "model")
        .annotate(tokens=Sum("charged_tokens"))
        .order_by()
    )  # fmt: skip
    return {(r["day"], r["model"] or "default model"): r["tokens"] for r in rows}


def _api_cells(month: dt.date, by: str, **which: Any) -> Cells:
    """API requests' tokens by day and `by` (a column: model, or the owner's name)."""
    start, end = _span(month)
    rows = (
        ApiRequest.objects.filter(created_at__gte=start, created_at__lt=end, **which)
        .annotate(day=TruncDate("created_at", tzinfo=dt.UTC), group=F(by))
        .values("day", "group")
        .annotate(tokens=Sum(F("prompt_tokens") + F("completion_tokens")))
        .order_by()
    )
    return {(r["day"], r["group"] or "—"): r["tokens"] for r in rows if r["tokens"]}


def _add(into: Cells, more: Cells) -> Cells:
    for cell, tokens in more.items():
        into[cell] = into.get(cell, 0) + tokens
    return into


def _series(
    cells: Cells, days: list[dt.date], until: dt.date | None, order: Iterable[str]
) -> list[Series]:
    """One bar series per group, the biggest first (drawn at the bottom)."""
    return [
        Series(
            group,
            [cells.get((d, group), 0) if until is None or d <= until else None for d in days],
            unit="tokens",
            style="bars",
            decimals=0,
        )  # fmt: skip
        for group in order
    ]


def _ranked(cells: Cells) -> list[str]:
    totals: dict[str, int] = defaultdict(int)
    for (_, group), tokens in cells.items():
        totals[group] += tokens
    return sorted(totals, key=lambda g: (-totals[g], g))


def _burn_down(
    budget: int, daily: list[int], days: list[dt.date], until: dt.date | None
) -> list[Series]:
    left, remaining = budget, []
    for day, used in zip(days, daily, strict=True):
        left -= used
        remaining.append(left if until is None or day <= until else None)
    pace = [budget * (1 - (i + 1) / len(days)) for i in range(len(days))]
    return [
        Series("tokens left", remaining, unit="tokens", style="step", axis="y2", decimals=0),
        Series("an even pace", pace, unit="tokens", style="dot", axis="y2", decimals=0),
    ]


def _chart(
    key: str, title: str, caption: str, month: dt.date, series: list[Series], *, budget: bool
) -> Chart:
    days = _days(month)
    today = _today(month)
    return Chart(
        id=f"chart-usage-{key}",
        title=title,
        caption=caption,
        x=[d.day for d in days],
        x_names=[d.isoformat() for d in days],
        names_label="day (UTC)",
        x_label=f"day of {month:%B %Y} (UTC)",
        y_label="tokens per day",
        y2_label="tokens left" if budget else "",
        series=series,
        stacked=True,
        kind="bars",
        marks=[Mark(today.day, "today")] if today else [],
        height=230,
        filename=f"usage-{month:%Y-%m}-{key}",
    )


def pages_chart(
    user: Any, month: dt.date, summary: dict[str, int], daily: list[DailyUsage]
) -> Chart:
    """The user's page runs: per day (DailyUsage, completions.budget.daily_breakdown) split
    by model, against their budget (usage_summary)."""
    days = _days(month)
    until = _today(month)
    totals = {row.day: row.total_tokens for row in daily}
    cells = _page_cells(month, owner_id=user.pk)
    for day in days:  # what the kept runs do not explain
        missing = totals.get(day, 0) - sum(t for (d, _), t in cells.items() if d == day)
        if missing > 0:
            cells[(day, NOT_KEPT)] = missing
    series = _series(cells, days, until, _ranked(cells))
    series += _burn_down(summary["budget"], [totals.get(d, 0) for d in days], days, until)
    return _chart("pages", "Your pages: tokens per day", "Workbench, Loom, Inspect and Batch runs, by model",
                  month, series, budget=True)  # fmt: skip


def key_chart(key: ApiKey, month: dt.date, summary: dict[str, int]) -> Chart:
    """One API key: its requests' tokens per day by model, against the key's budget."""
    days = _days(month)
    until = _today(month)
    cells = _api_cells(month, "model", key=key)
    daily = [sum(t for (d, _), t in cells.items() if d == day) for day in days]
    series = _series(cells, days, until, _ranked(cells))
    series += _burn_down(summary["budget"], daily, days, until)
    requests = key_totals(key, month)["requests"]
    return _chart(f"key-{key.pk}", f"{key.name}: tokens per day", f"{requests} requests this month, by model",
                  month, series, budget=True)  # fmt: skip


def everyone_charts(month: dt.date) -> list[Chart]:
    """Staff: every user's tokens per day (pages and API together), by user and by model."""
    days = _days(month)
    until = _today(month)
    names = dict(get_user_model().objects.values_list("pk", "username"))
    by_user: Cells = {}
    for row in DailyUsage.objects.filter(day__gte=month, day__lt=_span(month)[1].date()):
        _add(by_user, {(row.day, names.get(row.user_id, "?")): row.total_tokens})
    _add(by_user, _api_cells(month, "user__username", user__isnull=False))
    ranked = _ranked(by_user)
    if len(ranked) > TOP_USERS:
        others = set(ranked[TOP_USERS:])
        folded: Cells = {}
        for (day, user), tokens in by_user.items():
            _add(folded, {(day, "others" if user in others else user): tokens})
        by_user, ranked = folded, [*ranked[:TOP_USERS], "others"]
    by_model = _add(_page_cells(month), _api_cells(month, "model"))
    charts = [
        _chart("everyone-users", "Everyone: tokens per day by user", "pages and API together",
               month, _series(by_user, days, until, ranked), budget=False),
        _chart("everyone-models", "Everyone: tokens per day by model",
               "pages (runs kept 7 days) and API together", month,
               _series(by_model, days, until, _ranked(by_model)), budget=False),
    ]  # fmt: skip
    return [c for c in charts if c.series]  # nobody used anything yet: nothing to draw


def context(user: Any, month: dt.date, page: dict[str, Any]) -> dict[str, Any]:
    """The Usage page's charts (staff see everyone's too). `page` is the view's context:
    the summary, the days and the keys it read with the ledgers' readers; each key's
    entry gets its chart."""
    for entry in page["api_keys"]:
        entry["chart"] = key_chart(entry["key"], month, entry["summary"])
    return {
        "pages_chart": pages_chart(user, month, page["summary"], page["days"]),
        "everyone_charts": everyone_charts(month) if user.is_staff else [],
    }
