"""The public /v1 API's rows.

ApiKey (this section): a named key of one user. The secret is shown once, when the
key is made; only its SHA-256 is stored (secrets are 32 random bytes, so a slow hash
adds nothing), and a lookup goes by the public prefix, then compares hashes in
constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

SECRET_PREFIX = "weft-"
PREFIX_CHARS = 8  # random characters after SECRET_PREFIX that make the public prefix
TOUCH_EVERY = timedelta(minutes=1)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_secret(secret: str) -> tuple[str, str] | None:
    """A secret is `weft-<prefix>.<rest>`; the public prefix is `weft-<prefix>`."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        return None
    prefix, dot, rest = secret.partition(".")
    if not dot or not rest or len(prefix) != len(SECRET_PREFIX) + PREFIX_CHARS:
        return None
    return prefix, rest


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def for_user(self, user) -> ApiKeyQuerySet:
        return self.filter(user=user)

    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)

    def create_key(self, user, name: str, budget: int | None = None) -> tuple[ApiKey, str]:
        """A new key and its secret — the only time the secret exists in clear."""
        while True:
            prefix = SECRET_PREFIX + secrets.token_hex(PREFIX_CHARS // 2)
            if not self.filter(prefix=prefix).exists():
                break
        secret = f"{prefix}.{secrets.token_urlsafe(32)}"
        key = self.create(
            user=user,
            name=name.strip() or "key",
            prefix=prefix,
            secret_hash=hash_secret(secret),
            monthly_budget=budget,
        )
        return key, secret

    def _candidate(self, secret: str):
        parts = split_secret(secret)
        if parts is None:
            return None
        return self.select_related("user").filter(prefix=parts[0]).first()

    @staticmethod
    def _accepts(key: ApiKey | None, secret: str) -> bool:
        # Compare even when there is no key, so a missing prefix costs the same.
        stored = key.secret_hash if key is not None else "0" * 64
        matches = hmac.compare_digest(stored, hash_secret(secret))
        return key is not None and matches and key.revoked_at is None and key.user.is_active

    def authenticate(self, secret: str) -> ApiKey | None:
        """The live key this secret belongs to, or None (unknown, revoked, inactive user)."""
        key = self._candidate(secret)
        return key if self._accepts(key, secret) else None

    async def aauthenticate(self, secret: str) -> ApiKey | None:
        parts = split_secret(secret)
        if parts is None:
            return None
        key = await self.select_related("user").filter(prefix=parts[0]).afirst()
        return key if self._accepts(key, secret) else None


class ApiKey(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=32, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    monthly_budget = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="Prompt + completion tokens per calendar month (UTC); empty: "
        "WEFT_API_KEY_MONTHLY_BUDGET.",
    )

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def budget_tokens(self) -> int:
        if self.monthly_budget is not None:
            return self.monthly_budget
        return settings.WEFT_API_KEY_MONTHLY_BUDGET

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    def touch(self) -> None:
        """Record use, writing at most once a minute per key."""
        now = timezone.now()
        if self.last_used_at is not None and now - self.last_used_at < TOUCH_EVERY:
            return
        ApiKey.objects.filter(pk=self.pk).filter(
            models.Q(last_used_at__isnull=True) | models.Q(last_used_at__lt=now - TOUCH_EVERY)
        ).update(last_used_at=now)
        self.last_used_at = now

    async def atouch(self) -> None:
        now = timezone.now()
        if self.last_used_at is not None and now - self.last_used_at < TOUCH_EVERY:
            return
        await (
            ApiKey.objects.filter(pk=self.pk)
            .filter(
                models.Q(last_used_at__isnull=True) | models.Q(last_used_at__lt=now - TOUCH_EVERY)
            )
            .aupdate(last_used_at=now)
        )
        self.last_used_at = now


# --- below: the proxy's ledger and request metadata (owned by the /v1 proxy) ---------


class ApiKeyMonth(models.Model):
    """One key's tokens in one UTC calendar month: `reserved` holds the worst case of
    requests in flight, `used` what finished requests actually cost. A new month is a new
    row, so nothing is ever reset."""

    key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="months")
    month = models.DateField()
    used = models.BigIntegerField(default=0)
    reserved = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["key", "month"], name="api_key_month_unique")
        ]

    def __str__(self) -> str:
        return f"{self.key_id} {self.month:%Y-%m}: {self.used} used, {self.reserved} reserved"


class ApiRequestQuerySet(models.QuerySet):
    def for_key(self, key: ApiKey) -> ApiRequestQuerySet:
        return self.filter(key=key)


class ApiRequest(models.Model):
    """Metadata of one authenticated /v1 request — never its prompt or completion text.
    A row with `settled=False` still holds `reserved_tokens` in its key's month."""

    request_id = models.CharField(max_length=40, unique=True)
    key = models.ForeignKey(ApiKey, on_delete=models.SET_NULL, null=True, related_name="requests")
    key_prefix = models.CharField(max_length=32)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    endpoint = models.CharField(max_length=64)
    model = models.CharField(max_length=200, blank=True)
    served_model = models.CharField(max_length=200, blank=True)
    workload = models.CharField(max_length=16, blank=True)
    stream = models.BooleanField(default=False)
    status = models.PositiveSmallIntegerField(default=0)  # 0 while in flight
    error_code = models.CharField(max_length=64, blank=True)
    clamped = models.CharField(max_length=120, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    reserved_tokens = models.PositiveBigIntegerField(default=0)
    budget_month = models.DateField(null=True, blank=True)
    settled = models.BooleanField(default=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ApiRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["key", "-created_at"], name="api_request_key_recent"),
            models.Index(
                fields=["created_at"],
                name="api_request_unsettled",
                condition=models.Q(settled=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id} {self.endpoint} {self.status}"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


# --- below: completion jobs (Prefer: respond-async) and their harvest ------------------

JOB_ID_PREFIX = "job-"


def new_job_id() -> str:
    return JOB_ID_PREFIX + secrets.token_hex(12)


class CompletionJobQuerySet(models.QuerySet["CompletionJob"]):
    def for_key(self, key: ApiKey) -> CompletionJobQuerySet:
        return self.filter(key=key)

    def stale(self, now=None) -> CompletionJobQuerySet:
        """Running jobs whose worker stopped beating: it died mid-job."""
        now = now or timezone.now()
        cutoff = now - timedelta(seconds=settings.WEFT_GENERATION_STALE_SECONDS)
        return self.filter(status=CompletionJob.Status.RUNNING, heartbeat_at__lt=cutoff)

    def unclaimed(self, now=None) -> CompletionJobQuerySet:
        """Queued jobs whose Celery message was sent long ago: it may be lost (a Redis
        restart without persistence loses the broker's queue)."""
        now = now or timezone.now()
        cutoff = now - timedelta(seconds=settings.WEFT_JOB_REQUEUE_SECONDS)
        return self.filter(status=CompletionJob.Status.QUEUED, enqueued_at__lt=cutoff)

    def queue_expired(self, now=None) -> CompletionJobQuerySet:
        now = now or timezone.now()
        return self.filter(status=CompletionJob.Status.QUEUED, created_at__lt=now - JOB_QUEUED_TTL)

    def content_expired(self, now=None) -> CompletionJobQuerySet:
        """Terminal jobs whose request and result content must go (24 h after the end)."""
        now = now or timezone.now()
        return self.filter(
            status__in=CompletionJob.CONTENT_TERMINAL,
            finished_at__lt=now - JOB_CONTENT_TTL,
        )

    def metadata_expired(self, now=None) -> CompletionJobQuerySet:
        """Jobs past the 7 days their compact metadata is kept, accounting resolved."""
        now = now or timezone.now()
        return self.filter(
            status=CompletionJob.Status.EXPIRED, finished_at__lt=now - JOB_METADATA_TTL
        ).filter(models.Q(api_request__isnull=True) | models.Q(api_request__settled=True))


# The seed's Privacy section: queued jobs expire after 24 h; request/result content 24 h
# after the job becomes terminal; compact metadata 7 days after completion.
JOB_QUEUED_TTL = timedelta(hours=24)
JOB_CONTENT_TTL = timedelta(hours=24)
JOB_METADATA_TTL = timedelta(days=7)


class CompletionJob(models.Model):
    """A POST /v1/completions sent with `Prefer: respond-async`: validated, budgeted and
    reserved at submission like a synchronous request, run on a Celery worker, harvested
    with GET /v1/harvest/<public_id>. `result` is the backend's body verbatim (text, so
    not a byte of it is re-shaped); `api_request` is the submission's metadata row, which
    holds the reservation until the job settles."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        EXPIRED = "expired"

    ACTIVE = frozenset({Status.QUEUED, Status.RUNNING})
    TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.EXPIRED})
    CONTENT_TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED})

    public_id = models.CharField(max_length=40, unique=True, default=new_job_id, editable=False)
    key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="jobs")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="completion_jobs"
    )
    api_request = models.OneToOneField(
        ApiRequest, on_delete=models.SET_NULL, null=True, blank=True, related_name="job"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # What it was before its content expired (queued: it never ran).
    expired_from = models.CharField(max_length=16, blank=True)
    model = models.CharField(max_length=200)
    workload = models.CharField(max_length=16, blank=True)

    # Deduplication: the client's Idempotency-Key and a digest of the canonical body.
    idempotency_key = models.CharField(max_length=255, blank=True)
    body_sha256 = models.CharField(max_length=64)

    # Content, deleted JOB_CONTENT_TTL after the job ends.
    request = models.JSONField(null=True, blank=True, help_text="The body sent upstream.")
    result = models.TextField(blank=True, help_text="The backend's body, verbatim.")
    error = models.JSONField(null=True, blank=True, help_text="The error envelope.")

    # Compact metadata, kept JOB_METADATA_TTL.
    error_code = models.CharField(max_length=64, blank=True)
    clamped = models.CharField(max_length=120, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0, help_text="Exact or an upper bound.")
    prompt_exact = models.BooleanField(default=True)
    choice_count = models.PositiveIntegerField(default=1)
    max_tokens = models.PositiveIntegerField(default=0, help_text="Applied, after any clamp.")
    usage_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    usage_completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    charged_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    served_model = models.CharField(max_length=300, blank=True)

    run_token = models.CharField(max_length=64, blank=True, help_text="The worker running it.")
    attempts = models.PositiveSmallIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)

    created_at = models.DateTimeField(default=timezone.now)
    enqueued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    content_deleted_at = models.DateTimeField(null=True, blank=True)

    objects = CompletionJobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["key", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="api_job_idempotency_unique",
            )
        ]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="api_job_status_beat"),
            models.Index(fields=["status", "finished_at"], name="api_job_status_finished"),
            models.Index(fields=["status", "created_at"], name="api_job_status_created"),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL
