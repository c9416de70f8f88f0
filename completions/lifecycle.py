"""Moving a run between states, every move under the row's lock and re-checked there:
finish (once, settling the reservation), cancel, the sweeps (a worker that died, a
message that may be lost, the seed's expiry) and the release of a reservation when a
live row is deleted. The same for every caller: what differs by lane is its Policy
(completions.scheduler), by kind its expiry. The models know nothing of this module;
the pipeline, the scheduler, the API's jobs and the Celery tasks call it."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.signals import pre_delete
from django.dispatch import receiver
from django.utils import timezone

from completions import budget, registry, scheduler
from completions.models import (
    JOB_CONTENT_TTL,
    JOB_METADATA_TTL,
    Generation,
    ResultChunk,
    empty_choice,
)
from completions.signals import generation_finished
from completions.streaming import publish_now, state_message

log = logging.getLogger(__name__)
State = Generation.State
Kind = Generation.Kind
RUN_TASK = "completions.tasks.run_generation"


def enqueue(generation: Generation) -> None:
    """Send one turn to the run's queue (by the task's name: the tasks module imports
    this one). Safe to repeat: a turn with nothing left to claim does nothing."""
    current_app.send_task(RUN_TASK, args=(generation.pk, generation.queue), queue=generation.queue)


# --- finishing, once ----------------------------------------------------------------


def _charge(row: Generation) -> budget.Charge:
    """A run is charged the backend's usage when it reported one; otherwise the prompt
    plus the tokens received; nothing at all when nothing was produced. (A job's
    executor stores the usage it worked out by the same rule.)"""
    usage = row.usage if isinstance(row.usage, dict) else {}
    received = budget.count(usage.get("completion_tokens")) or 0
    return budget.charge(
        row.reserved_tokens, usage=usage, prompt_tokens=row.prompt_tokens, received=received,
        prompt_alone=False,
    )  # fmt: skip


def finish(
    generation: Generation,
    state: str,
    *,
    run_token: str | None,
    **fields: Any,
) -> bool:
    """Move a run to a terminal state and settle its reservation — exactly once. With a
    run_token, only the worker holding that token may finish it. Returns whether this
    call did it."""
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
        if row.kind == Kind.JOB:  # the next expiry step: its content, or (gone) its row
            row.expires_at = now + (JOB_METADATA_TTL if state == State.EXPIRED else JOB_CONTENT_TTL)
        if row.settled_at is None and row.budget_month is not None:
            used = _charge(row)
            row.charged_tokens = budget.settle(
                row.owner_id, row.budget_month, row.reserved_tokens, used.prompt_tokens,
                used.completion_tokens, key_id=row.key_id,
            )  # fmt: skip
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
    if generation.kind != Kind.JOB:
        publish_now(generation.pk, state_message(generation))
    generation_finished.send(sender=Generation, generation=generation)


# --- what a page, a client or a user asks ---------------------------------------------


def cancel(generation: Generation) -> None:
    """Ask the worker to stop; it keeps what arrived as "cancelled". A run still
    queued is cancelled here directly (nothing was sent, nothing is charged)."""
    Generation.objects.filter(pk=generation.pk, state__in=Generation.ACTIVE).update(
        cancel_requested=True
    )
    with transaction.atomic():
        row = Generation.objects.select_for_update().get(pk=generation.pk)
        if row.state == State.QUEUED:
            finish(row, State.CANCELLED, run_token=None)
    generation.refresh_from_db()


def check_alive(generation: Generation) -> Generation:
    """A page asking about a running generation: if its worker stopped beating,
    settle that now rather than waiting for the beat sweep."""
    if generation.state == State.RUNNING:
        recover_if_stale(generation)
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


# --- a worker that died -----------------------------------------------------------------


def recover_if_stale(generation: Generation) -> str:
    """A running row whose worker stopped beating: run it again while its lane's policy
    allows another attempt ("requeued"; the reservation stays, the checkpoint starts
    over), else end it ("ended": a page run interrupted with its text kept, an API job
    failed). Returns "" when there was nothing to do."""
    cutoff = timezone.now() - timedelta(seconds=settings.WEFT_GENERATION_STALE_SECONDS)
    with transaction.atomic():
        row = (
            Generation.objects.select_for_update()
            .filter(pk=generation.pk, state=State.RUNNING, updated_at__lt=cutoff)
            .first()
        )
        if row is None:
            return ""
        if row.attempts < scheduler.policy(row.lane).max_attempts and not row.cancel_requested:
            log.warning("generation %s: worker lost (attempt %s); queued again", row.pk,
                        row.attempts)  # fmt: skip
            row.state = State.QUEUED
            row.run_token = ""
            row.choices = [empty_choice(i) for i in range(len(row.choices))]
            row.usage = None
            row.requeued_at = timezone.now()
            row.save(update_fields=["state", "run_token", "choices", "usage", "requeued_at"])
            transaction.on_commit(lambda: enqueue(row))
            return "requeued"
        log.warning("generation %s: worker stopped beating; ended", row.pk)
        if row.kind == Kind.JOB:
            # Nothing of a job reaches its client before it succeeds: charge nothing.
            message = f"the job's worker was lost {row.attempts} times; not run again"
            row.usage = None
            finish(row, State.FAILED, run_token=None, error_code="internal_error",
                   error_message=message, error_detail=None)  # fmt: skip
        else:
            finish(row, State.INTERRUPTED, run_token=None, error_code="worker_lost")
    return "ended"


def recover_stale() -> dict[str, int]:
    counts = {"requeued": 0, "ended": 0}
    for generation in Generation.objects.stale().only("pk"):
        outcome = recover_if_stale(generation)
        if outcome:
            counts[outcome] += 1
    return counts


# --- a /v1 request whose web process died ------------------------------------------------


def release_lost_requests() -> int:
    """Give back the reservations of /v1 requests whose web process died before
    settling. A request in flight holds a lease (api.limits) that it renews; a row still
    unsettled well past a lease's life, whose lease is gone (the check registered with
    completions.registry), has no process left to settle it. What it generated is
    unknown, so nothing is charged now; but a lease can also be lost while its request
    runs on (Redis restarted, a long stall), so the row is marked released, and a settle
    that arrives later still charges what was used. Returns how many."""
    grace = timedelta(seconds=2 * settings.WEFT_API_LEASE_SECONDS + 5)
    candidates = budget.unsettled_requests(timezone.now() - grace)
    if not candidates:
        return 0
    alive = registry.leases_alive([(row.key_id, row.request_id) for row in candidates])
    released = sum(budget.release_request(row) for row in candidates if row.request_id not in alive)
    if released:
        log.warning("api: released %d reservations of requests whose process died", released)
    return released


# --- a message that may be lost ----------------------------------------------------------


def resend_or_fail(generation: Generation) -> str:
    """Still queued past its lane's wait: send its turn again ("resent") — harmless if
    the first was only late; a page run still queued a limit after a resend fails as
    never_started ("failed"), its reservation released. "" when nothing was due."""
    rule = scheduler.policy(generation.lane)
    now = timezone.now()
    cutoff = now - timedelta(seconds=rule.resend_after)
    with transaction.atomic():
        # Locked and re-checked: a worker claiming it meanwhile wins.
        row = (
            Generation.objects.select_for_update()
            .filter(pk=generation.pk, state=State.QUEUED)
            .first()
        )
        if row is None or (row.requeued_at or row.created_at) >= cutoff:
            return ""
        if row.requeued_at is not None and rule.give_up_after_resend:
            log.warning("generation %s: never started after a resend; failed", row.pk)
            finish(
                row,
                State.FAILED,
                run_token=None,
                error_code="never_started",
                error_message="No worker started the run, even after it was sent again.",
            )
            return "failed"
        row.requeued_at = now
        row.save(update_fields=["requeued_at"])
        transaction.on_commit(lambda: enqueue(row))
        log.warning("generation %s: queued over %ss; sent again", row.pk, rule.resend_after)
        return "resent"


def resend_lost() -> dict[str, int]:
    """The beat sweep for lost messages, every lane by its own wait."""
    counts = {"resent": 0, "failed": 0}
    shortest = min(scheduler.policy(lane).resend_after for lane in Generation.Lane.values)
    for generation in Generation.objects.unclaimed_since(shortest).only("pk", "lane"):
        outcome = resend_or_fail(generation)
        if outcome:
            counts[outcome] += 1
    return counts


# --- the seed's expiry ---------------------------------------------------------------------


def expire() -> dict[str, int]:
    """Each row's next expiry step, by its kind. A page run's checkpoint is deleted 7
    days after it was made (never while it runs: the stale sweep settles it first). An
    API job still queued 24 h expires (its reservation given back); 24 h after a job
    ends, its request, result and error are deleted and it reads "expired"; its compact
    row (id, Idempotency-Key, digest, state, tokens) goes 7 days after it ended, once
    its accounting is settled."""
    counts = {"deleted": 0, "queued": 0, "content": 0}
    due = Generation.objects.expiring()
    # A terminal row has been settled by finish(); running rows wait for the stale sweep.
    counts["deleted"] += due.pages().exclude(state__in=Generation.ACTIVE).delete()[0]
    jobs = due.filter(kind=Kind.JOB)
    for row in jobs.filter(state=State.QUEUED).only("pk"):
        with transaction.atomic():
            locked = Generation.objects.select_for_update().filter(
                pk=row.pk, state=State.QUEUED, expires_at__lte=timezone.now()
            )
            found = locked.first()
            if found is not None and finish(
                found, State.EXPIRED, run_token=None, expired_from=State.QUEUED,
                error_code="queue_expired", params={}, content_deleted_at=timezone.now(),
            ):  # fmt: skip
                counts["queued"] += 1
    ended = jobs.filter(state__in=Generation.TERMINAL).exclude(state=State.EXPIRED)
    for row in ended.only("pk"):
        counts["content"] += _drop_content(row.pk)
    settled = Q(settled_at__isnull=False) | Q(budget_month__isnull=True)
    counts["deleted"] += jobs.filter(settled, state=State.EXPIRED).delete()[0]
    if any(counts.values()):
        log.info("expired: %s", counts)
    return counts


def _drop_content(generation_id: int) -> int:
    now = timezone.now()
    with transaction.atomic():
        row = (
            Generation.objects.select_for_update()
            .filter(pk=generation_id, expires_at__lte=now, state__in=Generation.TERMINAL)
            .exclude(state=State.EXPIRED)
            .first()
        )
        if row is None:
            return 0
        ResultChunk.objects.filter(generation_id=row.pk).delete()
        Generation.objects.filter(pk=row.pk).update(
            expired_from=row.state,
            state=State.EXPIRED,
            params={},
            choices=[],
            error_message="",
            error_detail=None,
            result_token="",
            content_deleted_at=now,
            expires_at=(row.finished_at or now) + JOB_METADATA_TTL,
        )
    return 1
