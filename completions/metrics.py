"""What the database knows of the runs, read by every scrape of /metrics (core/metrics.py;
registered by completions/apps.py): runs queued and running per lane, and running ones
whose worker stopped beating. Read, never counted along the way."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from completions.models import Generation, ResultChunk
from config import lanes

log = logging.getLogger(__name__)


class RunsCollector(Collector):
    """Runs queued and running per lane, and running ones whose heartbeat is older than
    WEFT_GENERATION_STALE_SECONDS (their worker died: beat's sweep will settle them)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            active, stale = runs_by_lane()
        except Exception as exc:  # the database is down: the rest of the scrape still answers
            log.warning("metrics: runs not read: %s", type(exc).__name__)
            return
        runs = GaugeMetricFamily("weft_runs", "Runs queued or running now, by lane.",
                                 labels=["lane", "state"])  # fmt: skip
        for (lane, state), count in sorted(active.items()):
            runs.add_metric([lane, state], count)
        yield runs
        silent = GaugeMetricFamily(
            "weft_runs_stale",
            "Running runs whose worker has not beaten for WEFT_GENERATION_STALE_SECONDS.",
            labels=["lane"],
        )
        for lane, count in sorted(stale.items()):
            silent.add_metric([lane], count)
        yield silent
        yield GaugeMetricFamily(
            "weft_api_stored_result_bytes",
            "Bytes of API job results stored now (every person's; each is capped at "
            "WEFT_API_USER_STORED_BYTES).",
            value=ResultChunk.objects.stored_bytes(),
        )


def runs_by_lane() -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """({(lane, state): count} for queued and running, {lane: stale running})."""
    cutoff = timezone.now() - timedelta(seconds=settings.WEFT_GENERATION_STALE_SECONDS)
    active = {(lane, state): 0 for lane in lanes.LANES for state in ("queued", "running")}
    stale = dict.fromkeys(lanes.LANES, 0)
    rows = (
        Generation.objects.filter(state__in=Generation.ACTIVE)
        .values("lane", "state")
        .annotate(
            n=Count("id"), stale=Count("id", filter=Q(state="running", updated_at__lt=cutoff))
        )
    )
    for row in rows:
        lane = row["lane"] if row["lane"] in lanes.LANES else lanes.INTERACTIVE
        active[(lane, row["state"])] += row["n"]
        stale[lane] += row["stale"]
    return active, stale
