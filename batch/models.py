"""A batch: many prompts, one parameter set, each prompt run as the door's own
Generation (workload "batch") by the Celery workers. Rows, their queries and the
state moves a user asks for (pause, resume, cancel, retry); feeding the workers and
recording results is batch.feeding's.

A BatchItem keeps its own copy of each sample (text, finish reason, tokens, mean
logprob): the Generation is the door's recovery checkpoint and is purged after 7
days, the batch's results stay as long as the batch."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Count, Sum
from django.utils import timezone


class Batch(models.Model):
    class State(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"
        CANCELLED = "cancelled"
        DONE = "done"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="batches"
    )
    title = models.CharField(max_length=200)
    # The door's request body without the prompt, validated at upload, with
    # max_tokens pinned (the worst case was checked against it).
    params = models.JSONField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    total = models.PositiveIntegerField()
    pause_reason = models.TextField(blank=True)
    # Running time before the last resume, and when it last started running (None
    # while paused or ended): tokens per second and the ETA leave pauses out.
    run_seconds = models.FloatField(default=0.0)
    resumed_at = models.DateTimeField(null=True, blank=True)
    # When the feeder last gave this batch a slot (round robin between batches).
    fed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["state", "fed_at"])]

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.state}, {self.total} prompts)"

    @property
    def is_live(self) -> bool:
        return self.state in (self.State.RUNNING, self.State.PAUSED)

    def elapsed(self) -> float:
        running = (timezone.now() - self.resumed_at).total_seconds() if self.resumed_at else 0.0
        return self.run_seconds + max(0.0, running)

    def progress(self) -> dict[str, Any]:
        """Counts by item state, tokens per second and the ETA (None when unknown)."""
        rows = (
            self.items.order_by()
            .values("state")
            .annotate(n=Count("id"), tokens=Sum("completion_tokens"))
        )
        counts = {row["state"]: row["n"] for row in rows}
        tokens = sum(row["tokens"] or 0 for row in rows)
        done = counts.get(BatchItem.State.DONE, 0)
        failed = counts.get(BatchItem.State.FAILED, 0)
        cancelled = counts.get(BatchItem.State.CANCELLED, 0)
        active = counts.get(BatchItem.State.ACTIVE, 0)
        pending = counts.get(BatchItem.State.PENDING, 0)
        finished = done + failed + cancelled
        elapsed = self.elapsed()
        eta = None
        if self.state == self.State.RUNNING and finished and elapsed > 0:
            eta = (pending + active) * elapsed / finished
        total = self.total or 1
        return {
            "done": done,
            "failed": failed,
            "cancelled": cancelled,
            "active": active,
            "pending": pending,
            "remaining": pending + active,
            "finished": finished,
            "total": self.total,
            "percent": round(100 * finished / total, 1),
            "percent_done": round(100 * done / total, 2),
            "percent_failed": round(100 * (failed + cancelled) / total, 2),
            "tokens": tokens,
            "tokens_per_second": tokens / elapsed if elapsed > 0.5 else None,
            "eta_seconds": eta,
        }

    # --- what the user asks (under the batch row's lock) -----------------------------

    def _locked(self) -> Batch:
        return Batch.objects.select_for_update().get(pk=self.pk)

    def pause(self, reason: str = "") -> bool:
        """Stop feeding new prompts; the ones already sent finish."""
        with transaction.atomic():
            row = self._locked()
            if row.state != self.State.RUNNING:
                return False
            row._stop_clock()
            row.state = self.State.PAUSED
            row.pause_reason = reason
            row.save(update_fields=["state", "pause_reason", "run_seconds", "resumed_at"])
        self.refresh_from_db()
        return True

    def resume(self) -> bool:
        with transaction.atomic():
            row = self._locked()
            if row.state != self.State.PAUSED:
                return False
            row.state = self.State.RUNNING
            row.pause_reason = ""
            row.resumed_at = timezone.now()
            row.save(update_fields=["state", "pause_reason", "resumed_at"])
        self.refresh_from_db()
        return True

    def cancel(self) -> list[int]:
        """Cancel what is not sent yet; returns the ids of generations in flight, for
        the caller to cancel through the door (batch.feeding.cancel)."""
        with transaction.atomic():
            row = self._locked()
            if not row.is_live:
                return []
            row._stop_clock()
            row.state = self.State.CANCELLED
            row.finished_at = timezone.now()
            row.save(update_fields=["state", "run_seconds", "resumed_at", "finished_at"])
            row.items.filter(state=BatchItem.State.PENDING).update(
                state=BatchItem.State.CANCELLED, finished_at=timezone.now()
            )
            in_flight = list(
                row.items.filter(state=BatchItem.State.ACTIVE, generation__isnull=False)
                .values_list("generation_id", flat=True)
            )  # fmt: skip
        self.refresh_from_db()
        return in_flight

    def retry(self, items: models.QuerySet[BatchItem]) -> int:
        """Send failed prompts again: back to pending, the batch running again."""
        with transaction.atomic():
            row = self._locked()
            if row.state == self.State.CANCELLED:
                return 0
            count = items.filter(batch=row, state=BatchItem.State.FAILED).update(
                state=BatchItem.State.PENDING, generation=None, samples=[], error_code="",
                error_message="", finished_at=None,
            )  # fmt: skip
            if count and row.state == self.State.DONE:
                row.state = self.State.RUNNING
                row.finished_at = None
                row.resumed_at = timezone.now()
                row.save(update_fields=["state", "finished_at", "resumed_at"])
        self.refresh_from_db()
        return count

    def finish_if_complete(self) -> bool:
        """Mark a running or paused batch done once nothing is pending or in flight
        (caller holds the row lock)."""
        if not self.is_live:
            return False
        if self.items.filter(state__in=[BatchItem.State.PENDING, BatchItem.State.ACTIVE]).exists():
            return False
        self._stop_clock()
        self.state = self.State.DONE
        self.finished_at = timezone.now()
        self.save(update_fields=["state", "run_seconds", "resumed_at", "finished_at"])
        return True

    def _stop_clock(self) -> None:
        if self.resumed_at is not None:
            self.run_seconds += max(0.0, (timezone.now() - self.resumed_at).total_seconds())
            self.resumed_at = None


class BatchItem(models.Model):
    """One prompt of a batch and, once run, its samples."""

    class State(models.TextChoices):
        PENDING = "pending"
        ACTIVE = "active"  # its generation is queued or running
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="items")
    index = models.PositiveIntegerField(help_text="0-based position in the upload.")
    line = models.PositiveIntegerField(help_text="Line of the uploaded file it came from.")
    prompt = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    generation = models.ForeignKey(
        "completions.Generation", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="batch_items",
    )  # fmt: skip
    attempts = models.PositiveSmallIntegerField(default=0)
    # [{"text", "finish_reason", "tokens", "mean_logprob"}], one per sample.
    samples = models.JSONField(default=list, blank=True)
    # The request as its prompt was sent, but the prompt: the drawn seed and every
    # setting, kept when the door's checkpoint is purged (7 days) for the exports.
    sent = models.JSONField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(default=0)
    served_model = models.CharField(max_length=300, blank=True)
    error_code = models.CharField(max_length=100, blank=True)
    error_message = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["batch", "index"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "index"], name="batch_item_index_unique")
        ]
        indexes = [models.Index(fields=["batch", "state", "index"]), models.Index(fields=["state"])]

    def __str__(self) -> str:
        return f"batch {self.batch_id} item {self.index} ({self.state})"
