"""What a signed-in user sends the people who run Weft (the seed's "in-app Feedback
button" and "Email to raise it"): feedback, which staff mark resolved in the admin, and
requests for more budget, which staff approve or decline there (feedback.grants).

Neither holds prompt or completion text unless the user pasted it into the message:
the form fills in only the page's address, the time and the latest request id."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

MESSAGE_MAX = 5000
# More than any budget needs; a bigint column holds it with room to add.
AMOUNT_MAX = 10**12


def _today_utc() -> datetime:
    return datetime.combine(timezone.now().astimezone(UTC).date(), time.min, tzinfo=UTC)


def sent_today(user: Any) -> int:
    """Feedback and budget requests `user` has sent since midnight UTC: the one count
    WEFT_FEEDBACK_PER_DAY bounds (each of them can mail staff)."""
    since = _today_utc()
    return (
        Feedback.objects.for_user(user).filter(created_at__gte=since).count()
        + BudgetRequest.objects.for_user(user).filter(created_at__gte=since).count()
    )


def over_daily_quota(user: Any) -> str | None:
    """The refusal to show when `user` has sent their day's share, else None."""
    limit = settings.WEFT_FEEDBACK_PER_DAY
    if sent_today(user) < limit:
        return None
    return (
        f"You have sent {limit} messages and requests today, the most a day: "
        "send this one tomorrow (UTC), or reply to one you sent."
    )


class FeedbackQuerySet(models.QuerySet["Feedback"]):
    def for_user(self, user: Any) -> FeedbackQuerySet:
        return self.filter(owner_id=user.pk)


class Feedback(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="feedback"
    )
    message = models.TextField(max_length=MESSAGE_MAX)
    page_url = models.CharField("page", max_length=2000, blank=True)
    reported_at = models.DateTimeField("time (UTC)", default=timezone.now)
    request_id = models.CharField("request id", max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    resolved = models.BooleanField(default=False)
    reply = models.TextField(blank=True, help_text="Shown to the user on their feedback page.")

    objects = FeedbackQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "feedback"

    def __str__(self) -> str:
        return f"feedback {self.pk} from {self.owner} ({'resolved' if self.resolved else 'open'})"

    @property
    def state(self) -> str:
        return "resolved" if self.resolved else "open"


class BudgetRequestQuerySet(models.QuerySet["BudgetRequest"]):
    def for_user(self, user: Any) -> BudgetRequestQuerySet:
        return self.filter(owner_id=user.pk)

    def pending(self) -> BudgetRequestQuerySet:
        return self.filter(state=BudgetRequest.State.PENDING)


class BudgetRequest(models.Model):
    """More tokens a month for the user's pages (key empty) or for one API key."""

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DECLINED = "declined"
        WITHDRAWN = "withdrawn"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="budget_requests"
    )
    key = models.ForeignKey(
        "api.ApiKey",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="budget_requests",
    )
    amount = models.PositiveBigIntegerField(
        help_text="Tokens a month to add to the budget.",
        validators=[MinValueValidator(1), MaxValueValidator(AMOUNT_MAX)],
    )
    reason = models.TextField(max_length=MESSAGE_MAX)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # Set by feedback.grants when staff decide.
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    budget_before = models.PositiveBigIntegerField(null=True, blank=True)
    budget_after = models.PositiveBigIntegerField(null=True, blank=True)
    reply = models.TextField(blank=True, help_text="Shown to the user on the Usage page.")

    objects = BudgetRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["state", "created_at"])]
        # One request waits at a time per person (for the pages or one of their keys):
        # the view says so politely, this holds when two posts race past that check.
        constraints = [
            models.UniqueConstraint(
                fields=["owner"],
                condition=models.Q(state="pending"),
                name="one_pending_budget_request_per_owner",
            )
        ]

    def __str__(self) -> str:
        return f"{self.amount:,} more tokens for {self.target} ({self.state})"

    @property
    def target(self) -> str:
        return f"API key {self.key.prefix}…" if self.key_id and self.key else "the pages"
