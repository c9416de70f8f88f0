"""Moving a generation between states, every move under the row's lock and re-checked
there: finish (once, settling the reservation), cancel, the stale and lost-message
sweeps, and the release of a reservation when a live row is deleted. The models below
know nothing of this module; the pipeline (start, run now, the worker) and the Celery
tasks call it."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models.signals import pre_delete
from django.dispatch import receiver
from django.utils import timezone

from completions import budget
from completions.models import Generation
from completions.signals import generation_finished
from completions.streaming import publish_now, state_message
from config import lanes

log = logging.getLogger(__name__)
State = Generation.State
RUN_TASK = "completions.tasks.run_generation"


def lane_of(generation: Generation) -> str:
    return lanes.BATCH if generation.workload == "batch" else lanes.INTERACTIVE


def enqueue(generation_id: int, lane: str = lanes.INTERACTIVE) -> None:
    """Send the run's Celery message to its lane's pool (by the task's name: the tasks
    module imports this one). Safe to repeat: the worker claims a queued row once."""
    queue = lanes.queue_of_lane(lane, settings.WEFT_GENERATION_QUEUE)
    current_app.send_task(RUN_TASK, args=(generation_id,), queue=queue)


# --- finishing, once ----------------------------------------------------------------


def _actual_usage(row: Generation) -> tuple[int, int]:
    """What to charge: the backend's usage when it reported one; otherwise the prompt
    plus the tokens we received; nothing at all when nothing was produced."""
    usage = row.usage if isinstance(row.usage, dict) else {}
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if usage and not usage.get("estimated") and prompt is not None and completion is not None:
        return prompt, completion
    if not completion:
        return 0, 0
    return row.prompt_tokens, completion


def _count(value: Any) -> int | None:
    """A token count as the backend reported it, if it is one (a bool, a string or
    2**80 is not: such usage is ignored and the run charged by what was counted)."""
    return value if type(value) is int and 0 <= value <= 2**31 else None


def finish(
    generation: Generation,
    state: str,
    *,
    run_token: str | None,
    **fields: Any,
) -> bool:
    """Move a generation to a terminal state and settle its reservation — exactly once.
    With a run_token, only the worker holding that token may finish it. Returns
    whether this call did it."""
    with transaction.atomic():
        row = Generation.objects.select_for_update().filter(pk=generation.pk).first()
        if row is None:  # deleted meanwhile (its reservation was settled then)
            return False
        if row.is_terminal or (run_token is not None and row.run_token != run_token):
            return False
        for name, value in fields.items():
            setattr(row, name, value)
        now = timezone.now()
        row.state = state
        row.finished_at = now
        row.updated_at = now
        if row.settled_at is None and row.budget_month is not None:
            prompt, completion = _actual_usage(row)
            row.charged_tokens = budget.settle(
                row.owner_id, row.budget_month, row.reserved_tokens, prompt, completion
            )
            row.reserved_tokens = 0
            row.settled_at = now
        row.save()
        transaction.on_commit(lambda: announce(row))
    log.info(
        "generation %s %s charged=%s code=%s request_id=%s",
        row.pk, state, row.charged_tokens, row.error_code or "-", row.request_id or "-",
    )  # fmt: skip
    return True


def announce(generation: Generation) -> None:
    publish_now(generation.pk, state_message(generation))
    generation_finished.send(sender=Generation, generation=generation)


# --- what a page or a user asks ------------------------------------------------------


def cancel(generation: Generation) -> None:
    """Ask the worker to close the stream; it keeps the partial text as "cancelled".
    A run still queued is cancelled here directly."""
    Generation.objects.filter(pk=generation.pk).update(cancel_requested=True)
    generation.cancel_requested = True
    with transaction.atomic():
        row = Generation.objects.select_for_update().get(pk=generation.pk)
        if row.state == State.QUEUED:
            finish(row, State.CANCELLED, run_token=None)
    generation.refresh_from_db()


def check_alive(generation: Generation) -> Generation:
    """A page asking about a running generation: if its worker stopped beating,
    mark it interrupted now rather than waiting for the beat sweep."""
    if generation.state == State.RUNNING:
        mark_interrupted_if_stale(generation)
        generation.refresh_from_db()
    return generation


def release_reservation(generation: Generation) -> None:
    """Before a queued or running row is deleted: finish it as cancelled, which
    settles its reservation to what its checkpoint shows was used. A worker still
    streaming it then finds its row gone and closes the stream."""
    with transaction.atomic():
        row = (
            Generation.objects.select_for_update()
            .filter(pk=generation.pk, state__in=Generation.ACTIVE)
            .first()
        )
        if row is not None:
            log.warning("generation %s: deleted while %s; reservation settled", row.pk, row.state)
            finish(row, State.CANCELLED, run_token=None, error_code="deleted")


@receiver(pre_delete, sender=Generation, dispatch_uid="completions.release_on_delete")
def _release_on_delete(sender: Any, instance: Generation, **kwargs: Any) -> None:
    # Every way of deleting a live row (the admin's bulk action, a cascade from its
    # user, a shell) passes here, so no reservation is leaked with its row.
    if instance.state in Generation.ACTIVE:
        release_reservation(instance)


# --- the beat sweeps -----------------------------------------------------------------


def mark_interrupted_if_stale(generation: Generation) -> int:
    cutoff = timezone.now() - timedelta(seconds=settings.WEFT_GENERATION_STALE_SECONDS)
    with transaction.atomic():
        row = (
            Generation.objects.select_for_update()
            .filter(pk=generation.pk, state=State.RUNNING, updated_at__lt=cutoff)
            .first()
        )
        if row is None:
            return 0
        log.warning("generation %s: worker stopped beating; interrupted", row.pk)
        finish(row, State.INTERRUPTED, run_token=None, error_code="worker_lost")
    return 1


def mark_stale_interrupted() -> int:
    return sum(mark_interrupted_if_stale(g) for g in Generation.objects.stale())


def requeue_or_fail_if_never_started(generation: Generation) -> str:
    """Still queued past the limit: send the task again, once ("requeued"); still
    queued a limit after that: fail it as never_started ("failed"). A message that
    was only late is harmless — the worker claims a queued row exactly once and
    ignores a running or finished one. Returns "" when there was nothing to do."""
    limit = settings.WEFT_GENERATION_QUEUED_LIMIT_SECONDS
    now = timezone.now()
    cutoff = now - timedelta(seconds=limit)
    with transaction.atomic():
        # Locked and re-checked: a worker claiming it meanwhile wins.
        row = (
            Generation.objects.select_for_update()
            .filter(pk=generation.pk, state=State.QUEUED)
            .first()
        )
        if row is None:
            return ""
        if row.requeued_at is None:
            if row.created_at >= cutoff:
                return ""
            row.requeued_at = now
            row.save(update_fields=["requeued_at"])
            transaction.on_commit(lambda: enqueue(row.pk, lane_of(row)))
            log.warning("generation %s: queued over %ss; re-enqueued once", row.pk, limit)
            return "requeued"
        if row.requeued_at >= cutoff:
            return ""
        log.warning("generation %s: never started after a re-enqueue; failed", row.pk)
        finish(
            row,
            State.FAILED,
            run_token=None,
            error_code="never_started",
            error_message="No worker started the run, even after it was sent again.",
        )
    return "failed"


def requeue_or_fail_never_started() -> dict[str, int]:
    """The beat sweep for lost messages: re-enqueue each such row once; fail it
    (releasing its reservation) if it is still queued a limit after that."""
    counts = {"requeued": 0, "failed": 0}
    for generation in Generation.objects.never_started():
        outcome = requeue_or_fail_if_never_started(generation)
        if outcome:
            counts[outcome] += 1
    return counts
