"""The Batch page's charts (core/charts.py): while it runs, prompts/s and tokens/s over
time; once it is done, how its samples' completion lengths and mean logprobs spread —
a click on a bar filters the results table to the prompts with a sample in that bin
(`filtered`). Everything is read from the batch's own rows (BatchItem.finished_at,
completion_tokens, samples), so a reload draws the same picture."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL
from django.urls import reverse

from batch.models import Batch, BatchItem
from core.charts import Chart, Series, histogram

BUCKETS = 60  # about this many points over the run, whatever its length
NICE_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)

# --------------------------------------------------------------------------- rates

SPAN = """
SELECT min(finished_at), max(finished_at) FROM batch_batchitem
WHERE batch_id = %s AND finished_at IS NOT NULL AND state IN ('done', 'failed')
"""
RATES = """
SELECT floor(extract(epoch FROM finished_at - %s) / %s)::int AS bucket,
       count(*), coalesce(sum(completion_tokens), 0)
FROM batch_batchitem
WHERE batch_id = %s AND finished_at IS NOT NULL AND state IN ('done', 'failed')
GROUP BY bucket ORDER BY bucket
"""


def _bucket_seconds(span: float) -> int:
    wanted = span / BUCKETS
    return next((s for s in NICE_SECONDS if s >= wanted), NICE_SECONDS[-1])


def rate_chart(batch: Batch) -> Chart | None:
    """Finished prompts per second and completion tokens per second, per time bucket
    since the batch was created (paused time shows as zero). The newest bucket is
    still filling while the batch runs: its rate is over the part that has passed."""
    with connection.cursor() as cursor:
        cursor.execute(SPAN, [batch.pk])
        first, last = cursor.fetchone()
        if first is None:
            return None
        start = batch.created_at
        width = _bucket_seconds(max(1.0, (last - start).total_seconds()))
        cursor.execute(RATES, [start, width, batch.pk])
        rows = cursor.fetchall()
    counts = {bucket: (n, tokens) for bucket, n, tokens in rows}
    top = max(counts)
    elapsed = max(1.0, (last - start).total_seconds())
    x, prompts, tokens = [], [], []
    for bucket in range(0, top + 1):
        n, t = counts.get(bucket, (0, 0))
        seconds = width if bucket < top else max(1.0, min(width, elapsed - bucket * width))
        x.append(bucket * width)
        prompts.append(n / seconds)
        tokens.append(t / seconds)
    return Chart(
        id=f"chart-batch-{batch.pk}-rates",
        title="Throughput over time",
        caption=f"per {width} s, from the finished prompts' times",
        x=x,
        x_label="seconds since the batch started",
        y_label="prompts / s",
        y2_label="tokens / s",
        series=[
            Series("prompts", prompts, unit="prompts/s", style="line"),
            Series(
                "completion tokens", tokens, unit="tokens/s", style="dash", axis="y2", decimals=1
            ),
        ],
        height=200,
        filename=f"batch-{batch.pk}-throughput",
    )


# --------------------------------------------------------------------------- histograms

SAMPLES = """
SELECT CASE WHEN jsonb_typeof(s -> 'tokens') = 'number' THEN (s ->> 'tokens')::numeric END,
       CASE WHEN jsonb_typeof(s -> 'mean_logprob') = 'number'
            THEN (s ->> 'mean_logprob')::float8 END
FROM batch_batchitem i CROSS JOIN LATERAL jsonb_array_elements(
    CASE WHEN jsonb_typeof(i.samples) = 'array' THEN i.samples ELSE '[]'::jsonb END) s
WHERE i.batch_id = %s
"""


@dataclass(frozen=True)
class SampleFilter:
    """The results table's bin filter: prompts with a sample whose `field` lies in
    lo <= value < hi."""

    field: str  # "tokens" | "mean_logprob"
    lo: float
    hi: float
    param: str
    value: str

    @property
    def label(self) -> str:
        if self.field == "tokens":
            top = int(self.hi) - 1
            return f"completion length {int(self.lo)}" + ("" if top == int(self.lo) else f"–{top}")
        return f"mean logprob {self.lo:g} to {self.hi:g}"

    @property
    def query(self) -> str:
        """To append to the table's own links (&amp; is the template's)."""
        return f"&{self.param}={self.value}"


PARAMS = {"length": "tokens", "mean_logprob": "mean_logprob"}


def _number(value: float, field: str) -> str:
    """A bin edge as the histogram writes it (core.charts.Histogram.params)."""
    return str(int(value)) if field == "tokens" and value.is_integer() else repr(value)


def sample_filter(query: Any) -> tuple[SampleFilter | None, str]:
    """The filter a request asks for, and what to say about one it cannot use."""
    for param, field in PARAMS.items():
        raw = query.get(param)
        if raw is None:
            continue
        lo_text, sep, hi_text = str(raw).partition(":")
        try:
            lo, hi = float(lo_text), float(hi_text)
        except ValueError:
            lo = hi = math.nan
        usable = sep and math.isfinite(lo) and math.isfinite(hi) and lo < hi
        if not usable or max(abs(lo), abs(hi)) > 1e12:
            return (
                None,
                f"The filter “{param}” could not be read (it is lo:hi): every prompt is shown.",
            )
        return SampleFilter(field, lo, hi, param, f"{_number(lo, field)}:{_number(hi, field)}"), ""
    return None, ""


def filtered(items: QuerySet[BatchItem], chosen: SampleFilter | None) -> QuerySet[BatchItem]:
    if chosen is None:
        return items
    path = f"$[*] ? (@.{chosen.field} >= $lo && @.{chosen.field} < $hi)"  # field: ours, not input
    hit = RawSQL(
        "jsonb_path_exists(batch_batchitem.samples, %s::jsonpath,"
        " jsonb_build_object('lo', %s::float8, 'hi', %s::float8))",
        (path, chosen.lo, chosen.hi),
        output_field=BooleanField(),
    )
    return items.annotate(in_bin=hit).filter(in_bin=True)


def histograms(batch: Batch, chosen: SampleFilter | None = None) -> list[Chart]:
    """Completion length and mean logprob of every sample, one bar per bin."""
    with connection.cursor() as cursor:
        cursor.execute(SAMPLES, [batch.pk])
        rows = cursor.fetchall()
    lengths = [float(t) for t, _ in rows if t is not None]
    means = [float(m) for _, m in rows if m is not None and math.isfinite(m)]
    url = reverse("batch:results", args=[batch.pk])
    charts = []
    for values, param, title, unit, integer in (
        (lengths, "length", "Completion length", "tokens", True),
        (means, "mean_logprob", "Mean logprob per sample", "nats per token", False),
    ):
        if not values:
            continue
        hist = histogram(values, bins=20, integer=integer)
        params = hist.params()
        selected = None
        if chosen is not None and chosen.param == param and chosen.value in params:
            selected = params.index(chosen.value)
        charts.append(
            Chart(
                id=f"chart-batch-{batch.pk}-{param}",
                title=title,
                caption="click a bar (or press Enter on it) to list those prompts",
                kind="bars",
                x=list(range(len(hist.counts))),
                x_names=hist.names(),
                tick_names=hist.ticks(),
                names_label=unit,
                x_ticks="names",
                x_label=f"{title.lower()} ({unit})",
                y_label="samples",
                series=[Series("samples", hist.counts, style="bars", decimals=0)],
                filter={
                    "url": url,
                    "param": param,
                    "values": params,
                    "target": "#batch-results",
                    "selected": selected,
                },  # fmt: skip
                height=190,
                filename=f"batch-{batch.pk}-{param}-histogram",
            )
        )
    return charts


def charts_for(batch: Batch, query: Any = None) -> dict[str, Any]:
    """What templates/batch/_charts.html shows: the rates while the batch is live, the
    histograms (and the whole run's rates) once it is not."""
    chosen = sample_filter(query)[0] if query is not None else None
    return {
        "rates": rate_chart(batch),
        "histograms": [] if batch.is_live else histograms(batch, chosen),
    }
