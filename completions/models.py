"""Budgets and the recovery checkpoint (Generation) — the door's rows.

Domain operations live here as model and QuerySet methods: `Generation.objects.start`
validates, reserves and enqueues; the worker-side pipeline (completions.pipeline)
writes through the guarded updates below so that a redelivered or stale worker can
never overwrite a result or charge twice.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

log = logging.getLogger(__name__)

CHECKPOINT_TTL = timedelta(days=7)


class TokenBudget(models.Model):
    """A per-user override of WEFT_MONTHLY_TOKEN_BUDGET (edited in the admin)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="token_budget"
    )
    monthly_tokens = models.PositiveBigIntegerField(
        help_text="Prompt + completion tokens per calendar month (UTC)."
    )

    class Meta:
        verbose_name = "token budget override"

    def __str__(self) -> str:
        return f"{self.user} · {self.monthly_tokens:,} tokens/month"


class BudgetMonth(models.Model):
    """One user's ledger for one calendar month. The row is the lock: every
    reservation takes SELECT ... FOR UPDATE on it, so concurrent runs serialise."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    month = models.DateField(help_text="First day of the month (UTC).")
    used = models.BigIntegerField(default=0)
    reserved = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "month"], name="budget_month_unique"),
            models.CheckConstraint(
                condition=models.Q(reserved__gte=0), name="reserved_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.month:%Y-%m}: used {self.used}, reserved {self.reserved}"


class DailyUsage(models.Model):
    """Settled usage per user and UTC day, for the Usage page (outlives checkpoints)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    day = models.DateField()
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    runs = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="daily_usage_unique")]
        ordering = ["day"]

    def __str__(self) -> str:
        return f"{self.user} {self.day}: {self.total_tokens} tokens"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class GenerationQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> GenerationQuerySet:
        return self.filter(owner=user)

    def terminal(self) -> GenerationQuerySet:
        return self.filter(state__in=Generation.TERMINAL)

    def recoverable(self, user: Any) -> GenerationQuerySet:
        """Finished results the user has not saved yet and that have not expired."""
        return (
            self.for_user(user)
            .terminal()
            .exclude(state=Generation.State.REFUSED)
            .filter(claimed_at__isnull=True, expires_at__gt=timezone.now())
            .order_by("-created_at")
        )

    def stale(self) -> GenerationQuerySet:
        """Running rows whose worker stopped beating: it died mid-stream."""
        cutoff = timezone.now() - timedelta(seconds=settings.WEFT_GENERATION_STALE_SECONDS)
        return self.filter(state=Generation.State.RUNNING, updated_at__lt=cutoff)

    def mark_stale_interrupted(self) -> int:
        count = 0
        for generation in self.stale():
            count += generation.mark_interrupted_if_stale()
        return count

    def never_started(self) -> GenerationQuerySet:
        """Queued rows no worker claimed within WEFT_GENERATION_QUEUED_LIMIT_SECONDS
        of being queued (or of being re-enqueued): their Celery message was lost."""
        cutoff = timezone.now() - timedelta(seconds=settings.WEFT_GENERATION_QUEUED_LIMIT_SECONDS)
        return self.filter(state=Generation.State.QUEUED).filter(
            models.Q(requeued_at__isnull=True, created_at__lt=cutoff)
            | models.Q(requeued_at__lt=cutoff)
        )

    def requeue_or_fail_never_started(self) -> dict[str, int]:
        """The beat sweep for lost messages: re-enqueue each such row once; fail it
        (releasing its reservation) if it is still queued a limit after that."""
        counts = {"requeued": 0, "failed": 0}
        for generation in self.never_started():
            outcome = generation.requeue_or_fail_if_never_started()
            if outcome:
                counts[outcome] += 1
        return counts

    def delete(self) -> tuple[int, dict[str, int]]:
        """Deleting rows (the admin's bulk action, a shell) first settles those still
        holding a reservation — queued or running — so none is leaked with its row."""
        for generation in self.filter(
            state__in=[Generation.State.QUEUED, Generation.State.RUNNING]
        ):
            generation.release_reservation()
        return super().delete()

    def purge_expired(self) -> int:
        """Delete checkpoints past expires_at. Running rows wait for the stale sweep
        to settle them first, so no reservation is ever lost with its row."""
        deleted, _ = (
            self.filter(expires_at__lte=timezone.now())
            .exclude(state__in=[Generation.State.QUEUED, Generation.State.RUNNING])
            .delete()
        )
        return deleted

    def start(
        self,
        user: Any,
        data: dict,
        *,
        kind: str,
        target: dict | None = None,
        workload: str = "interactive",
        stream: bool = True,
        record_refusal: bool = False,
    ) -> Generation:
        from completions.pipeline import start_generation

        return start_generation(
            user,
            data,
            kind=kind,
            target=target,
            workload=workload,
            stream=stream,
            record_refusal=record_refusal,
        )

    def run_now(self, user: Any, data: dict, *, kind: str = "inspect") -> Generation:
        from completions.pipeline import run_now

        return run_now(user, data, kind=kind)


class Generation(models.Model):
    """One run against the backend and its recovery checkpoint."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"
        REFUSED = "refused"
        FAILED = "failed"
        INTERRUPTED = "interrupted"

    class Kind(models.TextChoices):
        WORKBENCH = "workbench"
        LOOM = "loom"
        INSPECT = "inspect"

    TERMINAL = frozenset({"done", "cancelled", "refused", "failed", "interrupted"})

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="generations"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    workload = models.CharField(max_length=16, default="interactive")
    params = models.JSONField(help_text="The validated request body (CompletionParams).")
    target = models.JSONField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    choices = models.JSONField(default=list)
    usage = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=200, blank=True)
    served_model = models.CharField(max_length=300, blank=True)
    error_code = models.CharField(max_length=100, blank=True)
    error_message = models.TextField(blank=True)
    retry_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="The backend's Retry-After on a failed run."
    )

    prompt_tokens = models.PositiveIntegerField(default=0, help_text="Exact or an upper bound.")
    reserved_tokens = models.BigIntegerField(default=0)
    charged_tokens = models.BigIntegerField(null=True, blank=True)
    budget_month = models.DateField(null=True, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    cancel_requested = models.BooleanField(default=False)
    run_token = models.CharField(max_length=64, blank=True, help_text="The worker streaming it.")

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # While running, the worker's heartbeat: a stale value means the worker died.
    updated_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(db_index=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Set when the lost-message sweep sent the run's Celery message a second time.
    requeued_at = models.DateTimeField(null=True, blank=True)

    objects = GenerationQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["owner", "state"]),
            models.Index(fields=["state", "updated_at"]),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"generation {self.pk} ({self.kind}, {self.state})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.expires_at is None:
            self.expires_at = (self.created_at or timezone.now()) + CHECKPOINT_TTL
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        self.release_reservation()
        return super().delete(*args, **kwargs)

    def release_reservation(self) -> None:
        """Before a queued or running row is deleted: finish it as cancelled, which
        settles its reservation to what its checkpoint shows was used. A worker still
        streaming it then finds its row gone and closes the stream."""
        from completions.pipeline import finish

        with transaction.atomic():
            row = (
                Generation.objects.select_for_update()
                .filter(pk=self.pk, state__in=[self.State.QUEUED, self.State.RUNNING])
                .first()
            )
            if row is not None:
                log.warning(
                    "generation %s: deleted while %s; reservation settled", row.pk, row.state
                )
                finish(row, self.State.CANCELLED, run_token=None, error_code="deleted")

    @property
    def is_terminal(self) -> bool:
        return self.state in self.TERMINAL

    @property
    def texts(self) -> list[str]:
        return [choice.get("text", "") for choice in self.choices]

    def claim(self) -> None:
        """Mark the result as saved elsewhere (History, Loom nodes): no longer recoverable."""
        if self.claimed_at is None:
            self.claimed_at = timezone.now()
            Generation.objects.filter(pk=self.pk, claimed_at__isnull=True).update(
                claimed_at=self.claimed_at
            )

    def cancel(self) -> None:
        """Ask the worker to close the stream; it keeps the partial text as "cancelled".
        A run still queued is cancelled here directly."""
        from completions.pipeline import finish

        Generation.objects.filter(pk=self.pk).update(cancel_requested=True)
        self.cancel_requested = True
        with transaction.atomic():
            row = Generation.objects.select_for_update().get(pk=self.pk)
            if row.state == self.State.QUEUED:
                finish(row, self.State.CANCELLED, run_token=None)
        self.refresh_from_db()

    def check_alive(self) -> Generation:
        """A page asking about a running generation: if its worker stopped beating,
        mark it interrupted now rather than waiting for the beat sweep."""
        if self.state == self.State.RUNNING:
            self.mark_interrupted_if_stale()
            self.refresh_from_db()
        return self

    def mark_interrupted_if_stale(self) -> int:
        from completions.pipeline import finish

        cutoff = timezone.now() - timedelta(seconds=settings.WEFT_GENERATION_STALE_SECONDS)
        with transaction.atomic():
            row = (
                Generation.objects.select_for_update()
                .filter(pk=self.pk, state=self.State.RUNNING, updated_at__lt=cutoff)
                .first()
            )
            if row is None:
                return 0
            log.warning("generation %s: worker stopped beating; interrupted", row.pk)
            finish(row, self.State.INTERRUPTED, run_token=None, error_code="worker_lost")
        return 1

    def requeue_or_fail_if_never_started(self) -> str:
        """Still queued past the limit: send the task again, once ("requeued"); still
        queued a limit after that: fail it as never_started ("failed"). A message that
        was only late is harmless — execute() claims a queued row exactly once and
        ignores a running or finished one. Returns "" when there was nothing to do."""
        from completions.pipeline import enqueue, finish

        limit = settings.WEFT_GENERATION_QUEUED_LIMIT_SECONDS
        now = timezone.now()
        cutoff = now - timedelta(seconds=limit)
        with transaction.atomic():
            # Locked and re-checked: a worker claiming it meanwhile wins.
            row = (
                Generation.objects.select_for_update()
                .filter(pk=self.pk, state=self.State.QUEUED)
                .first()
            )
            if row is None:
                return ""
            if row.requeued_at is None:
                if row.created_at >= cutoff:
                    return ""
                row.requeued_at = now
                row.save(update_fields=["requeued_at"])
                transaction.on_commit(lambda: enqueue(row.pk))
                log.warning("generation %s: queued over %ss; re-enqueued once", row.pk, limit)
                return "requeued"
            if row.requeued_at >= cutoff:
                return ""
            log.warning("generation %s: never started after a re-enqueue; failed", row.pk)
            finish(
                row,
                self.State.FAILED,
                run_token=None,
                error_code="never_started",
                error_message="No worker started the run, even after it was sent again.",
            )
        return "failed"
