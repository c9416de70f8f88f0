"""The door's rows: budgets (one ledger for pages, users' API allowances and keys) and
the one durable run (Generation) of every caller — a page's run, a Batch prompt, an
API job — with its recovery checkpoint.

The bottom of the import graph: rows and queries only. Moving a run between states
(start, claim, finish, cancel, the beat sweeps) is completions.lifecycle's,
completions.scheduler's and completions.pipeline's, which lock the row and re-check it,
so that a redelivered or stale worker can never overwrite a result or charge twice.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

# The seed's expiry rules (completions.lifecycle.expire applies them, per kind): a page
# run's checkpoint lives 7 days; an API job still queued after 24 h expires, its
# request, result and error go 24 h after it ends, its compact row 7 days after.
CHECKPOINT_TTL = timedelta(days=7)
JOB_QUEUED_TTL = timedelta(hours=24)
JOB_CONTENT_TTL = timedelta(hours=24)
JOB_METADATA_TTL = timedelta(days=7)


class TokenBudget(models.Model):
    """A user's overrides (edited in the admin): the pages' monthly budget
    (WEFT_MONTHLY_TOKEN_BUDGET) and the API allowance all the user's keys share
    (WEFT_API_USER_MONTHLY_BUDGET). Empty: the setting."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="token_budget"
    )
    monthly_tokens = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="Pages (Workbench, Loom, Inspect, Batch): prompt + completion tokens per "
        "calendar month (UTC). Empty: WEFT_MONTHLY_TOKEN_BUDGET.",
    )
    api_monthly_tokens = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="The API allowance shared by all the user's keys, per calendar month (UTC). "
        "Empty: WEFT_API_USER_MONTHLY_BUDGET.",
    )

    class Meta:
        verbose_name = "token budget override"

    def __str__(self) -> str:
        pages = "default" if self.monthly_tokens is None else f"{self.monthly_tokens:,}"
        api = "default" if self.api_monthly_tokens is None else f"{self.api_monthly_tokens:,}"
        return f"{self.user} · pages {pages} · API {api} tokens/month"


class BudgetMonth(models.Model):
    """One account's ledger for one calendar month: `reserved` holds the worst case of
    runs in flight, `used` what finished runs cost. Accounts (completions.budget):
    `pages:<user>` (the pages' budget), `api:<user>` (the allowance the user's keys
    share) and `key:<key>` (one key's part of it). The rows are the locks: a
    reservation locks every account it draws on, in account order."""

    account = models.CharField(max_length=40)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    month = models.DateField(help_text="First day of the month (UTC).")
    used = models.BigIntegerField(default=0)
    reserved = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["account", "month"], name="budget_account_month"),
            models.CheckConstraint(
                condition=models.Q(reserved__gte=0), name="reserved_not_negative"
            ),
        ]
        indexes = [models.Index(fields=["user", "month"], name="budget_user_month")]

    def __str__(self) -> str:
        return f"{self.account} {self.month:%Y-%m}: used {self.used}, reserved {self.reserved}"


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


def empty_choice(index: int) -> dict[str, Any]:
    """One choice of a run's checkpoint before anything arrived."""
    return {
        "index": index,
        "text": "",
        "finish_reason": None,
        "stop_reason": None,
        "logprobs": None,
        "prompt_logprobs": None,
    }


class GenerationQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> GenerationQuerySet:
        return self.filter(owner=user)

    def pages(self) -> GenerationQuerySet:
        """The pages' runs (API jobs are their key's, reached only through /v1)."""
        return self.exclude(kind=Generation.Kind.JOB)

    def terminal(self) -> GenerationQuerySet:
        return self.filter(state__in=Generation.TERMINAL)

    def recoverable(self, user: Any) -> GenerationQuerySet:
        """Finished results the user has not saved yet and that have not expired."""
        return (
            self.for_user(user)
            .pages()
            .terminal()
            .exclude(state=Generation.State.REFUSED)
            .filter(claimed_at__isnull=True, expires_at__gt=timezone.now())
            .order_by("-created_at")
        )

    def stale(self) -> GenerationQuerySet:
        """Running rows whose worker stopped beating: it died mid-stream."""
        cutoff = timezone.now() - timedelta(seconds=settings.WEFT_GENERATION_STALE_SECONDS)
        return self.filter(state=Generation.State.RUNNING, updated_at__lt=cutoff)

    def unclaimed_since(self, seconds: float) -> GenerationQuerySet:
        """Queued rows whose Celery message went out more than `seconds` ago (when
        queued, or when last sent again): it may have been lost with Redis."""
        cutoff = timezone.now() - timedelta(seconds=seconds)
        return self.filter(state=Generation.State.QUEUED).filter(
            models.Q(requeued_at__isnull=True, created_at__lt=cutoff)
            | models.Q(requeued_at__lt=cutoff)
        )

    def never_started(self) -> GenerationQuerySet:
        """Page runs no worker claimed within WEFT_GENERATION_QUEUED_LIMIT_SECONDS."""
        return self.unclaimed_since(settings.WEFT_GENERATION_QUEUED_LIMIT_SECONDS).filter(
            lane=Generation.Lane.INTERACTIVE
        )

    def expiring(self) -> GenerationQuerySet:
        """Rows whose next expiry step is due (completions.lifecycle.expire takes it)."""
        return self.filter(expires_at__lte=timezone.now())

    def without_content(self) -> GenerationQuerySet:
        """For status reads (a job's poll): never the request, checkpoint or result."""
        return self.defer("params", "choices", "error_message")


class Generation(models.Model):
    """One durable run of any caller against a backend, and its recovery checkpoint:
    a page's run (Workbench, Loom, Inspect), a Batch prompt (kind workbench, lane batch)
    or an API job (kind job, lane jobs: `key` set, its result stored in ResultChunk rows).
    One claim (completions.scheduler), one heartbeat and checkpoint, one finish that
    settles the reservation exactly once, one set of sweeps, whatever the caller."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"
        REFUSED = "refused"
        FAILED = "failed"
        INTERRUPTED = "interrupted"
        EXPIRED = "expired"  # an API job whose content was deleted (expired_from says what it was)

    class Kind(models.TextChoices):
        WORKBENCH = "workbench"
        LOOM = "loom"
        INSPECT = "inspect"
        JOB = "job"

    class Lane(models.TextChoices):
        INTERACTIVE = "interactive"
        JOBS = "jobs"
        BATCH = "batch"

    TERMINAL = frozenset(
        {
            State.DONE,
            State.CANCELLED,
            State.REFUSED,
            State.FAILED,
            State.INTERRUPTED,
            State.EXPIRED,
        }
    )
    ACTIVE = frozenset({State.QUEUED, State.RUNNING})

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="generations"
    )
    # Set when the run came through /v1 (an API job): it draws on the key's allowance.
    key = models.ForeignKey(
        "api.ApiKey", on_delete=models.CASCADE, null=True, blank=True, related_name="runs"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    lane = models.CharField(max_length=16, choices=Lane.choices, default=Lane.INTERACTIVE)
    # The Celery queue its messages go to (config.lanes): a worker claims only from its own.
    queue = models.CharField(max_length=100, blank=True)
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
    # An API job's error as its envelope shows it (code, message, type, param).
    error_detail = models.JSONField(null=True, blank=True)
    retry_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="The backend's Retry-After on a failed run."
    )

    prompt_tokens = models.PositiveIntegerField(default=0, help_text="Exact or an upper bound.")
    prompt_exact = models.BooleanField(default=True)
    reserved_tokens = models.BigIntegerField(default=0)
    charged_tokens = models.BigIntegerField(null=True, blank=True)
    budget_month = models.DateField(null=True, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    cancel_requested = models.BooleanField(default=False)
    run_token = models.CharField(max_length=64, blank=True, help_text="The worker streaming it.")
    attempts = models.PositiveSmallIntegerField(default=0)

    # API jobs: the public id, the client's Idempotency-Key with a digest of the body,
    # the clamp decided at submission, the submission's metadata row, and the result
    # (ResultChunk rows written under result_token, result_bytes long).
    public_id = models.CharField(max_length=40, unique=True, null=True, blank=True)
    idempotency_key = models.CharField(max_length=255, blank=True)
    body_sha256 = models.CharField(max_length=64, blank=True)
    clamped = models.CharField(max_length=120, blank=True)
    api_request = models.OneToOneField(
        "api.ApiRequest", on_delete=models.SET_NULL, null=True, blank=True, related_name="job"
    )
    result_token = models.CharField(max_length=64, blank=True)
    result_bytes = models.BigIntegerField(default=0)
    expired_from = models.CharField(max_length=16, blank=True)
    content_deleted_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # While running, the worker's heartbeat: a stale value means the worker died.
    updated_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When the next expiry step is due (the kind's policy: completions.lifecycle.expire).
    expires_at = models.DateTimeField(db_index=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Set when a sweep sent the run's Celery message again (lost, or run again).
    requeued_at = models.DateTimeField(null=True, blank=True)

    objects = GenerationQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["owner", "state"]),
            models.Index(fields=["state", "updated_at"]),
            # The scheduler: queued rows of a queue, and each owner's and key's last start.
            models.Index(fields=["queue", "state", "created_at"], name="generation_queue_state"),
            models.Index(fields=["queue", "owner", "started_at"], name="generation_owner_turn"),
            models.Index(fields=["key", "state"], name="generation_key_state"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["key", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="generation_idempotency_unique",
            )
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"generation {self.pk} ({self.kind}, {self.state})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.expires_at is None:
            created = self.created_at or timezone.now()
            ttl = JOB_QUEUED_TTL if self.kind == self.Kind.JOB else CHECKPOINT_TTL
            self.expires_at = created + ttl
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


class ResultChunkQuerySet(models.QuerySet):
    def of_owner(self, user_id: int) -> ResultChunkQuerySet:
        return self.filter(generation__owner_id=user_id)

    def stored_bytes(self) -> int:
        """The bytes these rows keep. octet_length reads a stored value's size from its
        header: the values themselves (a megabyte each) are never read."""
        size = models.Func(
            models.F("data"), function="octet_length", output_field=models.BigIntegerField()
        )
        return int(self.aggregate(n=models.Sum(size))["n"] or 0)


class ResultChunk(models.Model):
    """An API job's result, the backend's body byte for byte, in pieces of at most
    CHUNK_BYTES: written as it arrives and read back in order by the harvest, so
    neither holds a large body whole (Postgres caps one value at 1 GB). Rows of an
    attempt that did not finish (another `run_token`) are never read."""

    CHUNK_BYTES = 1024 * 1024

    generation = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="chunks")
    run_token = models.CharField(max_length=64)
    seq = models.PositiveIntegerField()
    data = models.BinaryField()

    objects = ResultChunkQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["generation", "run_token", "seq"], name="result_chunk_unique"
            )
        ]

    def __str__(self) -> str:
        return f"result of generation {self.generation_id}, piece {self.seq}"
