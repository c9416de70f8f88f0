"""Budgets and the recovery checkpoint (Generation) — the door's rows.

The bottom of the import graph: rows and queries only. Moving a generation between
states (start, run now, cancel, finish, the beat sweeps) is completions.lifecycle's and
completions.pipeline's, which lock the row and re-check it, so that a redelivered or
stale worker can never overwrite a result or charge twice.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

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

    def never_started(self) -> GenerationQuerySet:
        """Queued rows no worker claimed within WEFT_GENERATION_QUEUED_LIMIT_SECONDS
        of being queued (or of being re-enqueued): their Celery message was lost."""
        cutoff = timezone.now() - timedelta(seconds=settings.WEFT_GENERATION_QUEUED_LIMIT_SECONDS)
        return self.filter(state=Generation.State.QUEUED).filter(
            models.Q(requeued_at__isnull=True, created_at__lt=cutoff)
            | models.Q(requeued_at__lt=cutoff)
        )

    def purge_expired(self) -> int:
        """Delete checkpoints past expires_at. Running rows wait for the stale sweep
        to settle them first, so no reservation is ever lost with its row."""
        deleted, _ = (
            self.filter(expires_at__lte=timezone.now())
            .exclude(state__in=Generation.ACTIVE)
            .delete()
        )
        return deleted


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

    TERMINAL = frozenset(
        {State.DONE, State.CANCELLED, State.REFUSED, State.FAILED, State.INTERRUPTED}
    )
    ACTIVE = frozenset({State.QUEUED, State.RUNNING})

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
