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
from django.contrib.auth import get_user_model
from django.core.exceptions import ObjectDoesNotExist
from django.db import models, transaction
from django.utils import timezone

SECRET_PREFIX = "weft-"
PREFIX_CHARS = 8  # random characters after SECRET_PREFIX that make the public prefix
TOUCH_EVERY = timedelta(minutes=1)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class TooManyKeys(Exception):
    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"You already have {limit} live API keys, the most one user may have. "
            "Revoke one you no longer use, then make the new one."
        )


def split_secret(secret: str) -> tuple[str, str] | None:
    """A secret is `weft-<prefix>.<rest>`; the public prefix is `weft-<prefix>`."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        return None
    prefix, dot, rest = secret.partition(".")
    if not dot or not rest or len(prefix) != len(SECRET_PREFIX) + PREFIX_CHARS:
        return None
    return prefix, rest


# A key is looked up with what its budgets need (the user's allowance override), so the
# proxy never queries for them on its event loop.
KEY_RELATED = ("user", "user__token_budget")


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def for_user(self, user) -> ApiKeyQuerySet:
        return self.filter(user=user)

    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)

    def create_key(self, user, name: str, budget: int | None = None) -> tuple[ApiKey, str]:
        """A new key and its secret — the only time the secret exists in clear. Raises
        TooManyKeys past WEFT_API_MAX_KEYS_PER_USER live keys: the user's row is locked
        while counting, so two requests at once cannot both make the last one."""
        with transaction.atomic():
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            live = self.filter(user=user, revoked_at__isnull=True).count()
            if live >= settings.WEFT_API_MAX_KEYS_PER_USER:
                raise TooManyKeys(settings.WEFT_API_MAX_KEYS_PER_USER)
            return self._make(user, name, budget)

    def _make(self, user, name: str, budget: int | None) -> tuple[ApiKey, str]:
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
        return self.select_related(*KEY_RELATED).filter(prefix=parts[0]).first()

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
        key = await self.select_related(*KEY_RELATED).filter(prefix=parts[0]).afirst()
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
        help_text="This key's part of its user's API allowance: prompt + completion tokens "
        "per calendar month (UTC); empty: WEFT_API_KEY_MONTHLY_BUDGET. A request must fit "
        "in both this and what is left of the user's allowance.",
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
        """This key's own monthly cap (the user's allowance bounds it too)."""
        if self.monthly_budget is not None:
            return self.monthly_budget
        return settings.WEFT_API_KEY_MONTHLY_BUDGET

    def allowance_tokens(self) -> int:
        """The API allowance this key's user shares among all their keys (the user's
        override, else WEFT_API_USER_MONTHLY_BUDGET); completions.budget.api_allowance
        reads the same from the database."""
        if "_allowance" not in self.__dict__:  # once per looked-up key (cached seconds)
            try:
                override = self.user.token_budget.api_monthly_tokens
            except ObjectDoesNotExist:
                override = None
            self._allowance = override
        override = self._allowance
        return settings.WEFT_API_USER_MONTHLY_BUDGET if override is None else override

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


# --- below: request metadata (owned by the /v1 proxy) --------------------------------


class ApiRequestQuerySet(models.QuerySet):
    def for_key(self, key: ApiKey) -> ApiRequestQuerySet:
        return self.filter(key=key)


class ApiRequest(models.Model):
    """Metadata of one authenticated /v1 request — never its prompt or completion text.
    A row with `settled=False` still holds `reserved_tokens` in its key's and its user's
    month (completions.budget's accounts). `released_at`: the dead-process sweep gave the
    reservation back while the request may still have been running (its Redis lease was
    lost); a settle arriving later still charges what was used."""

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
    released_at = models.DateTimeField(null=True, blank=True)
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


JOB_ID_PREFIX = "job-"


def new_job_id() -> str:
    """A job's public id (also the default of migration 0003's old job table)."""
    return JOB_ID_PREFIX + secrets.token_hex(12)
