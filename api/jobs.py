"""Completion jobs: a POST /v1/completions with `Prefer: respond-async`, run on a worker.

A job is one of the door's durable runs (completions.models.Generation, kind "job",
lane "jobs", `key` set): the same claim (completions.scheduler: owners take turns on
the bulk pool), heartbeat, finish-and-settle-once and sweeps as every other run. What
is the API's own is here: the submission (validated, limited, planned and reserved
exactly like a synchronous request — the clamp is decided there — then stored as the
run, its reservation handed over from the submission's ApiRequest row in the same
transaction), the executor the worker runs it with (api/executor.py: the door's raw path,
completions.passthrough, so the result is the backend's body byte for byte, written in
ResultChunk pieces as it arrives: never held whole), and what a job looks like on the
wire.

Nothing here logs prompt or completion text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from api import quotas
from api.errors import ApiError, envelope
from api.models import JOB_ID_PREFIX, ApiKey, ApiRequest, new_job_id
from completions import budget, lifecycle, scheduler
from completions.models import JOB_CONTENT_TTL, JOB_QUEUED_TTL, Generation, ResultChunk
from completions.signals import generation_finished

log = logging.getLogger(__name__)
State = Generation.State
JOB = Generation.Kind.JOB
IDEMPOTENCY_KEY_MAX = 255
FINAL_SAVE_PATIENCE = 60.0
JOB_ID_HEX = 24  # api.models.new_job_id's

# The run's state as a job's status on the wire.
STATUS = {
    State.QUEUED: "queued",
    State.RUNNING: "running",
    State.DONE: "succeeded",
    State.FAILED: "failed",
    State.INTERRUPTED: "failed",
    State.REFUSED: "failed",
    State.CANCELLED: "cancelled",
    State.EXPIRED: "expired",
}


def is_job_id(value: str) -> bool:
    """A well-formed public id (anything else is looked up as nothing at all)."""
    digits = value.removeprefix(JOB_ID_PREFIX)
    return (
        value.startswith(JOB_ID_PREFIX)
        and len(digits) == JOB_ID_HEX
        and all(c in "0123456789abcdef" for c in digits)
    )


def jobs() -> Any:
    return Generation.objects.filter(kind=JOB)


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


def has_nul(value: Any) -> bool:
    """Whether a U+0000 is anywhere in the body: Postgres' jsonb cannot keep it."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    return False


def find_replay(key: ApiKey, idem: str, digest: str) -> Generation | None:
    """The job this Idempotency-Key already made, or None; ApiError 422 when it was made
    from another body."""
    if not idem:
        return None
    job = jobs().without_content().filter(key=key, idempotency_key=idem).first()
    if job is not None and job.body_sha256 != digest:
        raise ApiError(
            "idempotency_key_reused",
            f"Idempotency-Key {idem!r} was used with a different body for job "
            f"{job.public_id}; send the same body, or use a new key",
            param="Idempotency-Key",
            job_id=job.public_id,
        )
    return job


def check_room(key: ApiKey) -> None:
    """Refuse early (nothing reserved yet) when the key's or its person's jobs are at
    their cap; create() checks again under the locks."""
    quotas.check_jobs(key)


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


def create(sub: Submission) -> tuple[Generation, bool]:
    """Store the job and send it (on commit); returns (job, created). The submission's
    reservation becomes the job's, in the same transaction. A concurrent submission with
    the same Idempotency-Key that won the race is returned instead (created False): the
    caller then gives its own reservation back, as it does when the key's jobs are at
    their cap (ApiError queue_full)."""
    now = timezone.now()
    try:
        with transaction.atomic():
            # The user's and key's rows are the locks that make the caps exact.
            quotas.check_jobs(sub.key, lock=True)
            held = budget.hand_over_request(sub.request_id)  # the job's now: its worker settles it
            if held is None:  # made already, by this call's first try (api.db)
                made = jobs().get(api_request__request_id=sub.request_id)
                # That try's commit may have landed with its answer lost (the connection
                # dropped): its on-commit message never went. A second turn is harmless.
                if made.state == State.QUEUED:
                    transaction.on_commit(lambda: lifecycle.enqueue(made))
                return made, True
            job = Generation.objects.create(
                owner_id=sub.key.user_id,
                key=sub.key,
                kind=JOB,
                lane=Generation.Lane.JOBS,
                queue=scheduler.queue_for(Generation.Lane.JOBS),
                workload=sub.workload or "interactive",
                params=sub.body,
                target={"model": sub.model},  # metadata: kept when the content goes
                choices=[],
                prompt_tokens=sub.prompt_tokens,
                prompt_exact=sub.prompt_exact,
                reserved_tokens=held.reserved,
                budget_month=held.month,
                public_id=new_job_id(),
                idempotency_key=sub.idempotency_key,
                body_sha256=sub.digest,
                clamped=sub.clamped,
                api_request_id=held.id,
                created_at=now,
                expires_at=now + JOB_QUEUED_TTL,
            )
            transaction.on_commit(lambda: lifecycle.enqueue(job))
    except IntegrityError:
        winner = find_replay(sub.key, sub.idempotency_key, sub.digest)
        if winner is None:
            raise
        return winner, False
    log.info("job %s queued (key %s, %s choices)", job.public_id, sub.key.prefix, sub.choice_count)
    return job, True


def for_key(key: ApiKey, public_id: str) -> Generation | None:
    """The key's job by its public id, without its content (a status read)."""
    if not is_job_id(public_id):
        return None
    return jobs().without_content().filter(key=key, public_id=public_id).first()


def status_row(generation_id: int) -> Generation | None:
    return jobs().without_content().filter(pk=generation_id).first()


def cancel(job: Generation) -> Generation:
    """A queued job is cancelled at once (its reservation given back); a running one is
    asked to stop — its worker sees it within a heartbeat and ends it as cancelled."""
    lifecycle.cancel(job)
    found = status_row(job.pk)
    return found if found is not None else job


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


def expires_at(job: Generation) -> datetime | None:
    """When what is stored of the job goes next: a queued job after JOB_QUEUED_TTL, a
    finished job's content JOB_CONTENT_TTL after it ended."""
    if job.state == State.QUEUED:
        return job.created_at + JOB_QUEUED_TTL
    if job.is_terminal and job.state != State.EXPIRED and job.finished_at is not None:
        return job.finished_at + JOB_CONTENT_TTL
    return None


def status(job: Generation) -> str:
    return STATUS.get(State(job.state), "failed")


def error_body(job: Generation) -> dict[str, Any] | None:
    """The envelope a synchronous request would have answered with (the submission's
    request id), or None."""
    if status(job) != "failed":
        return None
    detail = job.error_detail if isinstance(job.error_detail, dict) else {}
    code = detail.get("code") or job.error_code or "internal_error"
    message = detail.get("message") or job.error_message or "the job failed"
    submission = job.api_request_id and ApiRequest.objects.filter(pk=job.api_request_id)
    request_id = submission.values_list("request_id", flat=True).first() if submission else ""
    return envelope(code, message, request_id=request_id or "", param=detail.get("param"))


def head(job: Generation) -> dict[str, Any]:
    """The job object without its result."""
    out: dict[str, Any] = {
        "id": job.public_id,
        "object": "completion.job",
        "status": status(job),
        "created_at": _unix(job.created_at),
        "started_at": _unix(job.started_at),
        "finished_at": _unix(job.finished_at),
        "expires_at": _unix(expires_at(job)),
        "model": (job.target or {}).get("model") or None,
        "idempotency_key": job.idempotency_key or None,
        "max_tokens_clamped": parse_clamp(job.clamped),
        "usage": None,
    }
    if job.charged_tokens is not None:
        prompt, completion = budget.counts(job.usage)
        out["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "charged_tokens": job.charged_tokens,
        }
    if job.state == State.RUNNING and job.cancel_requested:
        out["cancel_requested"] = True
    if job.state == State.EXPIRED:
        out["expired_from"] = STATUS.get(State(job.expired_from), job.expired_from) or None
    error = error_body(job)
    if error is not None:
        out["error"] = error
    return out


def has_result(job: Generation) -> bool:
    return job.state == State.DONE and bool(job.result_token) and job.result_bytes > 0


def result_pieces(job: Generation) -> list[int]:
    """The ids of the result's chunks, in order (read one at a time: never the whole)."""
    rows = ResultChunk.objects.filter(generation_id=job.pk, run_token=job.result_token)
    return list(rows.order_by("seq").values_list("pk", flat=True))


def read_piece(piece_id: int) -> bytes:
    data = ResultChunk.objects.filter(pk=piece_id).values_list("data", flat=True).first()
    return bytes(data) if data is not None else b""


def as_json(job: Generation) -> bytes:
    """The whole job object in memory (small jobs, tests); the harvest streams it with
    wire_pieces instead. `result` is the backend's bytes spliced in, never re-encoded."""
    opening, ids, closing = wire_parts(job)
    return opening + b"".join(read_piece(i) for i in ids) + closing


def wire_parts(job: Generation) -> tuple[bytes, list[int], bytes]:
    """The job object as (its opening bytes, the result's chunk ids, its closing
    bytes): the result's bytes go between the two, as the backend sent them."""
    data = json.dumps(head(job), ensure_ascii=False, separators=(",", ":")).encode()
    if not has_result(job):
        return data, [], b""
    return data[:-1] + b',"result":', result_pieces(job), b"}"


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


def on_finished(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """A job ended (any way: its worker, a cancel, a sweep, the expiry): its
    submission's metadata row gets the tokens, and its long-polls are woken."""
    if generation.kind != JOB or not generation.public_id:
        return
    try:
        if generation.api_request_id is not None and generation.charged_tokens is not None:
            prompt, completion = budget.counts(generation.usage)
            ApiRequest.objects.filter(pk=generation.api_request_id).update(
                prompt_tokens=prompt,
                completion_tokens=completion,
                error_code=generation.error_code[:64],
                served_model=generation.served_model[:200],
                finished_at=generation.finished_at,
            )
    except Exception as exc:  # metadata only: the job itself is settled
        log.warning("job %s: metadata update failed: %s", generation.public_id,
                    type(exc).__name__)  # fmt: skip
    publish(generation.public_id)


generation_finished.connect(on_finished, dispatch_uid="api.jobs.on_finished")
