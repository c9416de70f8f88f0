"""Prometheus metrics, at /metrics, for an operator to watch.

Every process of a machine counts — each web process, each worker, beat: they run
in prometheus_client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR, config/settings.py),
each writing its values to its own files there, and a scrape of any web process adds
them up. What lives in the database (runs queued and running per lane, runs whose
worker stopped beating) is read at scrape time by `RunsCollector`, never counted
along the way.

Label values are bounded, never a user's string: routes are the API's route
templates, models the short ids of the routing table, codes those of api/errors.py's
table (others are "other"), workloads and lanes their fixed names. Nothing here ever
sees a key's secret, a prompt or a completion.

Recording never breaks the request it measures: a failure to record is logged once.
"""

from __future__ import annotations

import glob
import hmac
import ipaddress
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from api.errors import ERRORS
from config import lanes

log = logging.getLogger(__name__)

OTHER = "other"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Codes of a run that failed at the backend (completions/errors.py), besides the table's.
RUN_CODES = frozenset(
    {"stream_incomplete", "timeout", "connect_error", "max_tokens_clamped", "budget_refused",
     "worker_lost", "never_started", "deleted", "internal_error", "backend_error",
     "bad_response", "tokenizer_missing"}
)  # fmt: skip
BACKEND_RUN_CODES = frozenset({"stream_incomplete", "timeout", "connect_error", "bad_response"})
REFUSAL_CODES = frozenset({"budget_exceeded", "queue_full", "rate_limited", "budget_refused"})

API_REQUESTS = Counter(
    "weft_api_requests",
    "/v1 requests answered, by route template, model short id, status, error code "
    "(empty: none) and X-Acs-Workload.",
    ["route", "model", "status", "code", "workload"],
)
API_DURATION = Histogram(
    "weft_api_request_duration_seconds",
    "/v1 requests from arrival to the last byte.",
    ["route", "stream"],
    buckets=LATENCY_BUCKETS,
)
API_FIRST_BYTE = Histogram(
    "weft_api_time_to_first_byte_seconds",
    "/v1 requests from arrival to the first byte of the body (a stream's first token).",
    ["route", "stream"],
    buckets=LATENCY_BUCKETS,
)
API_ACTIVE_STREAMS = Gauge(
    "weft_api_active_streams",
    "/v1 event streams being sent now.",
    ["route"],
    multiprocess_mode="livesum",
)
TOKENS = Counter(
    "weft_tokens",
    "Tokens in (prompt) and out (completion): /v1 requests answered by the proxy (with "
    "their model), and runs of the workers by lane.",
    ["source", "direction", "model"],
)
REFUSALS = Counter(
    "weft_refusals",
    "Requests and runs refused for the budget or a limit, by code.",
    ["source", "code"],
)
BACKEND_ERRORS = Counter(
    "weft_backend_errors",
    "Backend failures (an error status, no answer, a stream cut, a timeout), by kind.",
    ["source", "model", "kind"],
)
RUNS_FINISHED = Counter(
    "weft_runs_finished",
    "Runs of the workers (page runs, Batch prompts) that ended, by lane, state and code.",
    ["lane", "state", "code"],
)
WORKER_HEARTBEAT = Gauge(
    "weft_worker_heartbeat_timestamp_seconds",
    "When a worker of this pool last said it is alive (every few seconds): time() minus "
    "this is how long the pool has been silent.",
    ["pool"],
    multiprocess_mode="mostrecent",
)

_failed_once = False


def _safely(record: Any, *args: Any) -> None:
    global _failed_once
    try:
        record(*args)
    except Exception:
        if not _failed_once:
            _failed_once = True
            log.warning("metrics: recording failed (not logged again)", exc_info=True)


def _code(code: str) -> str:
    if not code:
        return ""
    return code if code in ERRORS or code in RUN_CODES or code == "client_closed" else OTHER


# --- /v1 -------------------------------------------------------------------------------


def api_request(req: Any, row: dict[str, Any], status: int, code: str, tokens: Any) -> None:
    """One /v1 request answered by the proxy (api/proxy.py); `row` is its metadata row
    (endpoint, model, workload, stream), `tokens` the (prompt, completion) it is
    billed, or None."""
    _safely(_api_request, req, row, status, code, tokens)


def _api_request(req: Any, row: dict[str, Any], status: int, code: str, tokens: Any) -> None:
    req.observed = True
    route, model = row["endpoint"], row.get("model") or ""
    stream = "true" if row.get("stream") else "false"
    code = _code(code)
    API_REQUESTS.labels(route, model, str(status), code, row.get("workload") or "").inc()
    API_DURATION.labels(route, stream).observe(time.perf_counter() - req.started)
    if req.first_byte_at is not None:
        API_FIRST_BYTE.labels(route, stream).observe(req.first_byte_at - req.started)
    if tokens is not None:
        prompt, completion = tokens
        TOKENS.labels("api", "prompt", model).inc(prompt)
        TOKENS.labels("api", "completion", model).inc(completion)
    if code in REFUSAL_CODES:
        REFUSALS.labels("api", code).inc()
    if code in ERRORS and ERRORS[code].upstream:
        BACKEND_ERRORS.labels("api", model, code).inc()


def api_answered(req: Any, route: str, code: str) -> None:
    """Any /v1 request the proxy did not record itself (the harvest, a job's 202, a
    401, an unknown route): api/asgi.py calls this when the request is over."""
    if req.streaming:
        _safely(lambda: API_ACTIVE_STREAMS.labels(req.streaming).dec())
    if req.observed:
        return
    row = {"endpoint": route, "workload": req.workload, "stream": False}
    status = ERRORS[code].status if code in ERRORS else (req.status or 500)
    _safely(_api_request, req, row, status, code, None)


def stream_started(req: Any) -> None:
    """A /v1 response that is an event stream has started (api/http.py)."""
    req.streaming = "/v1/completions"  # the one route that streams; its label
    _safely(lambda: API_ACTIVE_STREAMS.labels(req.streaming).inc())


# --- runs of the workers -------------------------------------------------------------


def run_finished(sender: Any, generation: Any, **kwargs: Any) -> None:
    """completions.signals.generation_finished: a run ended (in the worker, mostly)."""
    _safely(_run_finished, generation)


def _run_finished(g: Any) -> None:
    lane = g.lane if g.lane in lanes.LANES else lanes.INTERACTIVE
    code = _code(g.error_code)
    RUNS_FINISHED.labels(lane, g.state, code).inc()
    usage = g.usage or {}
    TOKENS.labels(lane, "prompt", "").inc(int(usage.get("prompt_tokens") or 0))
    TOKENS.labels(lane, "completion", "").inc(int(usage.get("completion_tokens") or 0))
    if code in REFUSAL_CODES or g.state == "refused":
        REFUSALS.labels(lane, code or OTHER).inc()
    if code in BACKEND_RUN_CODES or (code in ERRORS and ERRORS[code].upstream):
        BACKEND_ERRORS.labels(lane, "", code).inc()


HEARTBEAT_SECONDS = 5.0


def start_worker_heartbeat(**kwargs: Any) -> None:
    """Celery's worker_ready: beat, while the process lives, under its pool's name
    (WEFT_WORKER_POOL, set by launch.services; "all" for a worker of every pool)."""
    pool = os.environ.get("WEFT_WORKER_POOL", "")
    pool = pool if pool in lanes.POOLS else "all"

    def beat() -> None:
        while True:
            _safely(lambda: WORKER_HEARTBEAT.labels(pool).set(time.time()))
            time.sleep(HEARTBEAT_SECONDS)

    threading.Thread(target=beat, name="metrics-heartbeat", daemon=True).start()


# --- what the database knows, read at scrape time ------------------------------------------


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
            value=stored_result_bytes(),
        )


def stored_result_bytes() -> int:
    from completions.models import ResultChunk

    return ResultChunk.objects.stored_bytes()


def runs_by_lane() -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """({(lane, state): count} for queued and running, {lane: stale running})."""
    from datetime import timedelta

    from django.db.models import Count, Q
    from django.utils import timezone

    from completions.models import Generation

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


# --- the scrape ---------------------------------------------------------------------------

_LIVE_FILE = re.compile(r"gauge_live\w+_(\d+)\.db$")


def _forget_dead_processes() -> None:
    """A process killed outright never says it is gone: its live gauges (a web
    process's open streams) would count for ever. Processes of this machine share the
    folder, so a pid that no longer runs is gone."""
    folder = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    for path in glob.glob(os.path.join(folder, "gauge_live*.db")):
        match = _LIVE_FILE.search(path)
        if match is None:
            continue
        pid = int(match[1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            multiprocess.mark_process_dead(pid, folder)
        except PermissionError:
            pass  # alive, another user's


def exposition() -> tuple[bytes, str]:
    """(the text format, its content type) of every process's metrics and the runs."""
    _forget_dead_processes()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(RunsCollector())
    return generate_latest(registry), CONTENT_TYPE_LATEST


def may_scrape(request: HttpRequest) -> bool:
    """With WEFT_METRICS_TOKEN set, whoever sends it as a Bearer token; without, only
    this machine (behind the proxy, the client's own address counts: see deploy/)."""
    token = settings.WEFT_METRICS_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), token.encode()
        )
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False
