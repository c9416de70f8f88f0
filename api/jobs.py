"""Completion jobs: a POST /v1/completions with `Prefer: respond-async`, run on a worker.

Submission (web process, api.proxy's hook): validated, limited, planned and reserved
exactly like a synchronous request — the clamp is decided there — then stored as a
CompletionJob and sent to Celery; the answer is 202 with the job. The reservation stays
on the submission's ApiRequest row until the job settles.

The worker claims a queued job by writing a fresh run_token under the row's lock, beats
while the backend works, and finishes it — result or error stored, reservation settled
— in one transaction guarded by that token. A redelivered message finds the job running
or finished and does nothing; a job whose worker died (its beat went stale) is put back
in the queue by the beat sweep, its reservation untouched; a lost message is sent again.
So no job is lost and none is charged twice. The backend is reached through the door's
raw path (completions.passthrough), so `result` is its body byte for byte.

Nothing here logs prompt or completion text.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import math
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from api.errors import ApiError, envelope
from api.models import (
    JOB_CONTENT_TTL,
    JOB_QUEUED_TTL,
    ApiKey,
    ApiKeyMonth,
    ApiRequest,
    CompletionJob,
)
from completions import passthrough
from completions.errors import BackendError
from completions.pipeline import with_db_retry
from completions.schema import CompletionParams
from config import lanes

log = logging.getLogger(__name__)
Status = CompletionJob.Status
RUN_TASK = "api.tasks.run_completion_job"
IDEMPOTENCY_KEY_MAX = 255
FINAL_SAVE_PATIENCE = 60.0

# --- the request side --------------------------------------------------------------------


def wants_async(headers: dict[str, str]) -> bool:
    """RFC 7240: `Prefer: respond-async` (among other preferences, any case)."""
    for part in headers.get("prefer", "").split(","):
        token = part.split(";", 1)[0].strip().lower()
        if token == "respond-async":
            return True
    return False


def idempotency_key(headers: dict[str, str]) -> str:
    value = headers.get("idempotency-key")
    if value is None:
        return ""
    value = value.strip()
    if (
        not value
        or len(value) > IDEMPOTENCY_KEY_MAX
        or not value.isascii()
        or not value.isprintable()
    ):
        raise ApiError(
            "invalid_request",
            f"Idempotency-Key must be 1–{IDEMPOTENCY_KEY_MAX} printable ASCII characters",
            param="Idempotency-Key",
        )
    return value


def body_digest(data: Any) -> str:
    """The same body, however its keys are ordered or spaced, has the same digest."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def find_replay(key: ApiKey, idem: str, digest: str) -> CompletionJob | None:
    """The job this Idempotency-Key already made, or None; ApiError 422 when it was made
    from another body."""
    if not idem:
        return None
    job = CompletionJob.objects.filter(key=key, idempotency_key=idem).first()
    if job is not None and job.body_sha256 != digest:
        raise ApiError(
            "idempotency_key_reused",
            f"Idempotency-Key {idem!r} was used with a different body for job "
            f"{job.public_id}; send the same body, or use a new key",
            param="Idempotency-Key",
            job_id=job.public_id,
        )
    return job


@dataclass
class Submission:
    """What the proxy decided for one job request."""

    key: ApiKey
    request_id: str
    model: str
    body: dict[str, Any]  # sent upstream: max_tokens as applied, never streamed
    prompt_tokens: int
    prompt_exact: bool
    choice_count: int
    max_tokens: int
    clamped: str
    workload: str
    idempotency_key: str
    digest: str


def create(sub: Submission) -> tuple[CompletionJob, bool]:
    """Store the job and send it (on commit); returns (job, created). A concurrent
    submission with the same Idempotency-Key that won the race is returned instead
    (created False): the caller then gives its own reservation back."""
    now = timezone.now()
    try:
        with transaction.atomic():
            api_request = ApiRequest.objects.select_for_update().get(request_id=sub.request_id)
            job = CompletionJob.objects.create(
                key=sub.key,
                user_id=sub.key.user_id,
                api_request=api_request,
                model=sub.model,
                workload=sub.workload,
                idempotency_key=sub.idempotency_key,
                body_sha256=sub.digest,
                request=sub.body,
                prompt_tokens=sub.prompt_tokens,
                prompt_exact=sub.prompt_exact,
                choice_count=sub.choice_count,
                max_tokens=sub.max_tokens,
                clamped=sub.clamped,
                created_at=now,
                enqueued_at=now,
            )
            api_request.status = 202
            api_request.save(update_fields=["status"])
            transaction.on_commit(lambda: enqueue(job.pk))
    except IntegrityError:
        winner = find_replay(sub.key, sub.idempotency_key, sub.digest)
        if winner is None:
            raise
        return winner, False
    log.info("job %s queued (key %s, %s choices)", job.public_id, sub.key.prefix, sub.choice_count)
    return job, True


def enqueue(job_id: int) -> None:
    """Send the job's Celery message (by name: the tasks module imports this one)."""
    queue = lanes.queue_of_lane(lanes.JOBS, settings.WEFT_GENERATION_QUEUE)
    current_app.send_task(RUN_TASK, args=(job_id,), queue=queue)


def for_key(key: ApiKey, public_id: str) -> CompletionJob | None:
    return CompletionJob.objects.filter(key=key, public_id=public_id).first()


def cancel(job: CompletionJob) -> CompletionJob:
    """A queued job is cancelled here (its reservation given back); a running one is
    asked to stop — its worker sees it at the next beat and ends it as cancelled."""
    CompletionJob.objects.filter(pk=job.pk, status__in=CompletionJob.ACTIVE).update(
        cancel_requested=True
    )
    with transaction.atomic():
        row = CompletionJob.objects.select_for_update().get(pk=job.pk)
        if row.status == Status.QUEUED:
            _end(row, Status.CANCELLED, charge=(0, 0))
    row.refresh_from_db()
    if row.is_terminal:
        publish(row.public_id)
    return row


# --- what a job looks like on the wire -----------------------------------------------------


def _unix(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp())


def parse_clamp(header: str) -> dict[str, Any] | None:
    if not header:
        return None
    fields = dict(part.partition("=")[::2] for part in header.split(","))
    out: dict[str, Any] = {}
    for name in ("requested", "applied"):
        with contextlib.suppress(ValueError):
            out[name] = int(fields.get(name, ""))
    out["reason"] = fields.get("reason", "")
    out["source"] = fields.get("source", "")
    return out


def expires_at(job: CompletionJob) -> datetime | None:
    """When what is stored of the job goes next: a queued job after JOB_QUEUED_TTL, a
    finished job's content JOB_CONTENT_TTL after it ended."""
    if job.status == Status.QUEUED:
        return job.created_at + JOB_QUEUED_TTL
    if job.status in CompletionJob.CONTENT_TERMINAL and job.finished_at is not None:
        return job.finished_at + JOB_CONTENT_TTL
    return None


def as_json(job: CompletionJob) -> bytes:
    """The job object. `result` is spliced in as the backend's bytes, never re-encoded."""
    out: dict[str, Any] = {
        "id": job.public_id,
        "object": "completion.job",
        "status": job.status,
        "created_at": _unix(job.created_at),
        "started_at": _unix(job.started_at),
        "finished_at": _unix(job.finished_at),
        "expires_at": _unix(expires_at(job)),
        "model": job.model,
        "idempotency_key": job.idempotency_key or None,
        "max_tokens_clamped": parse_clamp(job.clamped),
        "usage": None,
    }
    if job.charged_tokens is not None:
        prompt, completion = job.usage_prompt_tokens or 0, job.usage_completion_tokens or 0
        out["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "charged_tokens": job.charged_tokens,
        }
    if job.status == Status.RUNNING and job.cancel_requested:
        out["cancel_requested"] = True
    if job.status == Status.EXPIRED:
        out["expired_from"] = job.expired_from or None
    if job.status == Status.FAILED and job.error is not None:
        out["error"] = job.error
    data = json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()
    if job.status == Status.SUCCEEDED and job.result:
        data = data[:-1] + b',"result":' + job.result.encode() + b"}"
    return data


# --- notifications: a finished job wakes its long-polls --------------------------------------


def channel(public_id: str) -> str:
    return f"weft:jobs:done:{public_id}"


_publisher: Any = None


def publish(public_id: str) -> None:
    """Tell waiting long-polls (in any web process). Best effort: a long-poll also
    looks at the row itself every few seconds, so a lost message only delays it."""
    global _publisher
    import redis

    try:
        if _publisher is None:
            _publisher = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, retry=None)
        _publisher.publish(channel(public_id), b"1")
    except Exception as exc:
        _publisher = None
        log.warning("job %s: notify failed: %s", public_id, type(exc).__name__)


# --- the worker ----------------------------------------------------------------------------


@dataclass
class Outcome:
    status: str
    result: str | None = None
    error: ApiError | None = None
    charge: tuple[int, int] = (0, 0)
    served_model: str = ""


def claim(job_id: int, run_token: str) -> CompletionJob | None:
    with transaction.atomic():
        row = (
            CompletionJob.objects.select_for_update(of=("self",))
            .select_related("key")
            .filter(pk=job_id)
            .first()
        )
        if row is None:
            log.warning("job %s: gone before its task ran", job_id)
            return None
        if row.status != Status.QUEUED:
            # A redelivered or re-sent message: the job is running or finished already.
            log.info("job %s: already %s; message ignored", row.public_id, row.status)
            return None
        if row.cancel_requested or row.key.revoked_at is not None:
            _end(row, Status.CANCELLED, charge=(0, 0))
            transaction.on_commit(lambda: publish(row.public_id))
            return None
        now = timezone.now()
        row.status = Status.RUNNING
        row.run_token = run_token
        row.attempts += 1
        row.started_at = now
        row.heartbeat_at = now
        row.save(update_fields=["status", "run_token", "attempts", "started_at", "heartbeat_at"])
        return row


class _Heartbeat(threading.Thread):
    """Beats while the backend works (a stalled backend is not a dead worker) and
    notices a cancel request or a lost claim (the stale sweep gave the job to another)."""

    def __init__(self, job: CompletionJob, run_token: str) -> None:
        super().__init__(name=f"job-beat-{job.pk}", daemon=True)
        self.job_id = job.pk
        self.run_token = run_token
        self.interval = max(
            settings.WEFT_CHECKPOINT_INTERVAL_SECONDS, settings.WEFT_GENERATION_STALE_SECONDS / 5
        )
        self.stopping = threading.Event()
        self.stop_work = threading.Event()

    def run(self) -> None:
        from django.db import connections

        try:
            while not self.stopping.wait(self.interval):
                try:
                    rows = CompletionJob.objects.filter(
                        pk=self.job_id, status=Status.RUNNING, run_token=self.run_token
                    )
                    if not rows.update(heartbeat_at=timezone.now()):
                        self.stop_work.set()  # not ours any more
                    elif rows.filter(cancel_requested=True).exists():
                        self.stop_work.set()
                except Exception as exc:  # the next beat tries again on a fresh connection
                    log.warning("job %s: beat failed: %s", self.job_id, type(exc).__name__)
                    connections.close_all()
        finally:
            connections.close_all()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


def execute(job_id: int) -> None:
    """Run one job (the Celery task's body)."""
    run_token = uuid.uuid4().hex
    job = with_db_retry(lambda: claim(job_id, run_token), f"job {job_id}: claim", 30.0)
    if job is None:
        return
    beat = _Heartbeat(job, run_token)
    beat.start()
    try:
        outcome = asyncio.run(_run(job, beat.stop_work))
    except Exception as exc:  # a bug must still end the job, not leave it "running"
        log.error("job %s failed unexpectedly: %s", job.public_id, type(exc).__name__)
        outcome = Outcome(Status.FAILED, error=ApiError("internal_error", "internal error"))
    finally:
        beat.stop()
    if outcome.status == Status.CANCELLED and not _cancel_was_asked(job):
        return  # the claim was lost (the sweep re-queued the job): the new run settles
    with_db_retry(
        lambda: finish(job, run_token, outcome), f"job {job.public_id}: final save",
        FINAL_SAVE_PATIENCE,
    )  # fmt: skip


def _cancel_was_asked(job: CompletionJob) -> bool:
    return CompletionJob.objects.filter(pk=job.pk, cancel_requested=True).exists()


async def _run(job: CompletionJob, stop: threading.Event) -> Outcome:
    started = time.monotonic()
    work = asyncio.ensure_future(_call(job))

    async def watch() -> None:
        while not stop.is_set():
            await asyncio.sleep(0.1)

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            return work.result()
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        # As for a synchronous client that hung up: the prompt and what the backend can
        # have generated meanwhile, at the configured decode rate, no more.
        elapsed = time.monotonic() - started
        per_choice = min(job.max_tokens, math.ceil(elapsed * settings.WEFT_API_DECODE_RATE))
        return Outcome(Status.CANCELLED, charge=(job.prompt_tokens, per_choice * job.choice_count))
    finally:
        watcher.cancel()
        await passthrough.close_client()


async def _call(job: CompletionJob) -> Outcome:
    from api.proxy import upstream_error

    assert job.request is not None
    try:
        to = await passthrough.target(job.model)
    except BackendError as exc:
        return Outcome(Status.FAILED, error=upstream_error(exc))
    served = to.model.root or to.model.id
    try:
        async with asyncio.timeout(settings.WEFT_API_REQUEST_WINDOW_SECONDS):
            response = await passthrough.open_completion(to, job.request, workload=job.workload)
        try:
            raw = await response.aread()
        finally:
            await response.aclose()
    except TimeoutError:
        error = ApiError(
            "upstream_deadline", "the backend did not answer inside the request window"
        )
        return await _failed(job, to, error, served)
    except BackendError as exc:
        return await _failed(job, to, upstream_error(exc), served)
    except httpx.HTTPError as exc:
        return await _failed(job, to, upstream_error(passthrough.transport_error(exc)), served)
    try:
        text = raw.decode()
        body = json.loads(text)
    except ValueError:
        body, text = None, ""
    if not isinstance(body, dict) or "error" in body or not isinstance(body.get("choices"), list):
        error = ApiError("upstream_error", "the backend answered with something not a completion")
        return await _failed(job, to, error, served)
    usage: dict[str, Any] = body["usage"] if isinstance(body.get("usage"), dict) else {}
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        # No usable usage: the prompt as planned and every token asked for (the most it
        # can have been, and never more than was reserved).
        prompt, completion = job.prompt_tokens, job.max_tokens * job.choice_count
    return Outcome(Status.SUCCEEDED, result=text, charge=(prompt, completion), served_model=served)


def _count(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value <= 2**31 else None


async def _failed(
    job: CompletionJob, to: passthrough.Target, error: ApiError, served: str
) -> Outcome:
    """As a synchronous request that failed: the prompt is charged, counted exactly
    when the stored count was only a bound."""
    prompt = job.prompt_tokens
    if not job.prompt_exact:
        counted = await passthrough.count_tokens(to, _prompts(job))
        prompt = sum(counted) if counted is not None else prompt
    return Outcome(Status.FAILED, error=error, charge=(prompt, 0), served_model=served)


def _prompts(job: CompletionJob) -> list[str | list[int]]:
    try:
        return CompletionParams.model_validate(job.request).prompts
    except ValueError:
        return []


def finish(job: CompletionJob, run_token: str, outcome: Outcome) -> bool:
    """End a running job and settle its reservation — once, only by its claimant."""
    with transaction.atomic():
        row = CompletionJob.objects.select_for_update().filter(pk=job.pk).first()
        if row is None or row.status != Status.RUNNING or row.run_token != run_token:
            return False
        row.result = outcome.result or ""
        row.served_model = outcome.served_model[:300]
        if outcome.error is not None:
            row.error_code = outcome.error.code
            row.error = error_body(outcome.error, row)
        _end(row, outcome.status, charge=outcome.charge)
        transaction.on_commit(lambda: publish(row.public_id))
    log.info("job %s %s charged=%s code=%s", row.public_id, row.status, row.charged_tokens,
             row.error_code or "-")  # fmt: skip
    return True


def error_body(error: ApiError, job: CompletionJob) -> dict[str, Any]:
    """The envelope a synchronous request would have answered with."""
    submission = job.api_request
    request_id = submission.request_id if submission is not None else ""
    return envelope(error.code, error.message, request_id=request_id, param=error.param)


def _end(row: CompletionJob, status: str, *, charge: tuple[int, int]) -> None:
    """Terminal: the row saved and its reservation settled to `charge`, in the caller's
    transaction (the job's row is locked)."""
    now = timezone.now()
    row.status = status
    row.finished_at = now
    row.run_token = ""
    prompt, completion = charge
    charged = settle_request(
        row.api_request_id,
        prompt,
        completion,
        error_code=row.error_code,
        served_model=row.served_model[:200],
        finished_at=now,
    )
    if charged is not None:
        row.charged_tokens = charged
        row.usage_prompt_tokens = prompt
        row.usage_completion_tokens = completion
    row.save()


def settle_request(api_request_id: int | None, prompt: int, completion: int, **fields: Any):
    """The ledger's settle (api.ledger), inside this transaction: the reservation
    replaced by use (never more than was reserved), exactly once. Returns the tokens
    charged, or None when it was settled already."""
    if api_request_id is None:
        return None
    req = ApiRequest.objects.select_for_update().filter(pk=api_request_id).first()
    if req is None or req.settled:
        return None
    charged = min(req.reserved_tokens, prompt + completion)
    if req.budget_month is not None and req.key_id is not None:
        ApiKeyMonth.objects.filter(key_id=req.key_id, month=req.budget_month).update(
            reserved=F("reserved") - req.reserved_tokens, used=F("used") + charged
        )
    req.settled = True
    req.prompt_tokens = prompt
    req.completion_tokens = completion
    for name, value in fields.items():
        setattr(req, name, value)
    req.save()
    return charged


# --- the beat sweeps -------------------------------------------------------------------------


def recover() -> dict[str, int]:
    """Run again the jobs whose worker died, send again the messages that were lost."""
    counts = {"requeued": 0, "resent": 0, "failed": 0}
    for job in CompletionJob.objects.stale():
        outcome = _requeue_if_stale(job.pk)
        if outcome:
            counts[outcome] += 1
    for job in CompletionJob.objects.unclaimed():
        updated = CompletionJob.objects.filter(
            pk=job.pk, status=Status.QUEUED, enqueued_at=job.enqueued_at
        ).update(enqueued_at=timezone.now())
        if updated:
            log.warning("job %s: not claimed after %ss; sent again", job.public_id,
                        settings.WEFT_JOB_REQUEUE_SECONDS)  # fmt: skip
            enqueue(job.pk)
            counts["resent"] += 1
    return counts


def _requeue_if_stale(job_id: int) -> str:
    with transaction.atomic():
        row = CompletionJob.objects.stale().select_for_update().filter(pk=job_id).first()
        if row is None:
            return ""
        if row.attempts >= settings.WEFT_JOB_MAX_ATTEMPTS:
            log.warning("job %s: worker lost %s times; failed", row.public_id, row.attempts)
            row.error_code = "internal_error"
            row.error = error_body(
                ApiError(
                    "internal_error", f"the job's worker was lost {row.attempts} times; not retried"
                ),
                row,
            )
            _end(row, Status.FAILED, charge=(0, 0))
            transaction.on_commit(lambda: publish(row.public_id))
            return "failed"
        # The dead worker's attempt is never settled: only the run that finishes is.
        log.warning("job %s: worker stopped beating; queued again", row.public_id)
        row.status = Status.QUEUED
        row.run_token = ""
        row.heartbeat_at = None
        row.enqueued_at = timezone.now()
        row.save(update_fields=["status", "run_token", "heartbeat_at", "enqueued_at"])
        transaction.on_commit(lambda: enqueue(row.pk))
    return "requeued"


def expire() -> dict[str, int]:
    """The seed's Privacy section: a job queued 24 h expires (its reservation given
    back); request and result content go 24 h after a job ends; the compact row (id,
    Idempotency-Key, body digest, status, tokens) goes 7 days after, once its accounting
    is settled."""
    now = timezone.now()
    counts = {"queued": 0, "content": 0, "deleted": 0}
    for job in CompletionJob.objects.queue_expired(now):
        with transaction.atomic():
            row = (
                CompletionJob.objects.queue_expired(now).select_for_update().filter(pk=job.pk)
            ).first()
            if row is None:
                continue
            row.expired_from = Status.QUEUED
            row.request = None
            row.content_deleted_at = now
            _end(row, Status.EXPIRED, charge=(0, 0))
            transaction.on_commit(functools.partial(publish, row.public_id))
            counts["queued"] += 1
    counts["content"] = CompletionJob.objects.content_expired(now).update(
        expired_from=F("status"),
        status=Status.EXPIRED,
        request=None,
        result="",
        error=None,
        content_deleted_at=now,
    )
    counts["deleted"], _ = CompletionJob.objects.metadata_expired(now).delete()
    if any(counts.values()):
        log.info("jobs expired: %s", counts)
    return counts
