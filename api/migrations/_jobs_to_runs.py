"""Data of migration 0005: completion jobs become the door's runs, per-key month rows
the ledger's accounts. Nothing saved is lost: every job keeps its public id, its
Idempotency-Key and digest, its state, tokens and charge, its error envelope and its
result (as ResultChunk pieces); a job still queued or running keeps its reservation,
which moves from its submission's metadata row to the run, as at a new submission."""

from collections import defaultdict
from datetime import timedelta

from django.conf import settings

from config import lanes

STATES = {
    "queued": "queued",
    "running": "running",
    "succeeded": "done",
    "failed": "failed",
    "cancelled": "cancelled",
    "expired": "expired",
}
CHUNK = 1024 * 1024
MIGRATED = "migrated"  # the run token the migrated result's pieces are stored under


def forward(apps, schema_editor) -> None:
    _months(apps)
    _jobs(apps)


def _months(apps) -> None:
    ApiKeyMonth = apps.get_model("api", "ApiKeyMonth")
    BudgetMonth = apps.get_model("completions", "BudgetMonth")
    shared: dict[tuple[int, object], list[int]] = defaultdict(lambda: [0, 0])
    for row in ApiKeyMonth.objects.select_related("key").iterator():
        user_id = row.key.user_id
        BudgetMonth.objects.create(
            account=f"key:{row.key_id}", user_id=user_id, month=row.month,
            used=row.used, reserved=row.reserved,
        )  # fmt: skip
        totals = shared[(user_id, row.month)]
        totals[0] += row.used
        totals[1] += row.reserved
    for (user_id, month), (used, reserved) in shared.items():
        BudgetMonth.objects.create(
            account=f"api:{user_id}", user_id=user_id, month=month, used=used, reserved=reserved
        )


def _jobs(apps) -> None:
    CompletionJob = apps.get_model("api", "CompletionJob")
    ApiRequest = apps.get_model("api", "ApiRequest")
    Generation = apps.get_model("completions", "Generation")
    ResultChunk = apps.get_model("completions", "ResultChunk")
    queue = lanes.queue_of_lane(lanes.JOBS, settings.WEFT_GENERATION_QUEUE)
    for job in CompletionJob.objects.select_related("api_request").iterator():
        state = STATES.get(job.status, "failed")
        active = state in ("queued", "running")
        submission = job.api_request
        holds = active and submission is not None and not submission.settled
        run = Generation.objects.create(
            owner_id=job.user_id,
            key_id=job.key_id,
            kind="job",
            lane="jobs",
            queue=queue,
            workload=job.workload or "interactive",
            params=job.request or {},
            target={"model": job.model},
            choices=[],
            state=state,
            expired_from=STATES.get(job.expired_from, job.expired_from),
            usage=_usage(job),
            served_model=job.served_model,
            error_code=job.error_code,
            error_message=_error(job).get("message", ""),
            error_detail=_error(job) or None,
            prompt_tokens=job.prompt_tokens,
            prompt_exact=job.prompt_exact,
            reserved_tokens=submission.reserved_tokens if holds else 0,
            budget_month=submission.budget_month if submission is not None else None,
            charged_tokens=job.charged_tokens,
            settled_at=None if holds else (job.finished_at or job.created_at),
            cancel_requested=job.cancel_requested,
            run_token=job.run_token,
            attempts=job.attempts,
            public_id=job.public_id,
            idempotency_key=job.idempotency_key,
            body_sha256=job.body_sha256,
            clamped=job.clamped,
            api_request_id=job.api_request_id,
            result_token=MIGRATED if job.result else "",
            result_bytes=len(job.result.encode()),
            content_deleted_at=job.content_deleted_at,
            created_at=job.created_at,
            updated_at=job.heartbeat_at or job.started_at or job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            requeued_at=job.enqueued_at if job.enqueued_at != job.created_at else None,
            expires_at=_expires(job, state),
        )
        data = job.result.encode()
        ResultChunk.objects.bulk_create(
            [
                ResultChunk(
                    generation_id=run.pk, run_token=MIGRATED, seq=i, data=data[at : at + CHUNK]
                )
                for i, at in enumerate(range(0, len(data), CHUNK))
            ]
        )
        if holds:
            ApiRequest.objects.filter(pk=submission.pk).update(settled=True, status=202)


def _usage(job) -> dict | None:
    if job.usage_prompt_tokens is None and job.usage_completion_tokens is None:
        return None
    return {
        "prompt_tokens": job.usage_prompt_tokens or 0,
        "completion_tokens": job.usage_completion_tokens or 0,
    }


def _error(job) -> dict:
    body = job.error if isinstance(job.error, dict) else {}
    inner = body.get("error") if isinstance(body.get("error"), dict) else {}
    return {k: inner.get(k) for k in ("code", "message", "param") if k in inner}


def _expires(job, state: str):
    if state == "queued":
        return job.created_at + timedelta(hours=24)
    ended = job.finished_at or job.created_at
    if state == "expired":
        return ended + timedelta(days=7)
    if state == "running":
        return job.created_at + timedelta(hours=24)
    return ended + timedelta(hours=24)
