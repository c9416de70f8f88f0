"""Running a batch on the pages' own pipeline.

Each prompt becomes one of the door's Generations (kind "workbench", workload
"batch", so the door sends `X-Acs-Workload: batch`), started with
completions.pipeline.start — validated, its worst case reserved, enqueued on commit —
and executed by the ordinary Celery workers with the door's claim / checkpoint /
settle machinery. The Workbench can therefore open any row as it opens any run.

Bounded concurrency: at most WEFT_BATCH_CONCURRENCY batch generations are queued or
running at once, over every user's batches (a slot goes round the running batches in
turn). A batch never puts more than that in Celery's queue, so an interactive run
waits behind at most that many batch tasks, and the worker threads beyond it stay free
for the pages. Feeding happens when a batch starts, each time one of its generations
finishes (in the worker, on the door's generation_finished signal), and every few
seconds from beat (`batch.tasks.sweep_batches`), which also resumes feeding after a
restart and records any finished generation a lost signal left unrecorded.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from celery import current_app
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from batch.models import Batch, BatchItem
from batch.uploads import Prompt, UploadError
from completions import lifecycle, pipeline
from completions.budget import BudgetRefused, usage_summary
from completions.client import count_tokens, get_model, prompt_token_bound
from completions.errors import BackendError, clean_text
from completions.models import Generation
from completions.schema import MAX_OUTPUT_WORK, ParamsInvalid, default_max_tokens, validate_params
from workbench.models import logprob_stats

log = logging.getLogger(__name__)
KIND = "workbench"  # the Workbench opens a batch row like any of its runs
FEED_TASK = "batch.tasks.feed_batches"
FEED_LOCK = 0x62617463  # pg advisory lock: one feeder at a time ("batc")
# A row whose worker died (worker_lost: a restart, a kill) is sent again this often
# before it counts as failed.
MAX_ATTEMPTS = 2
ItemState = BatchItem.State


def group_name(batch_id: int) -> str:
    return f"batch-{batch_id}"


# --- before anything is sent: the plan and the budget ---------------------------------


@dataclass
class Plan:
    body: dict[str, Any]  # the door's request without the prompt, max_tokens pinned
    counts: list[int]  # prompt tokens per prompt
    exact: bool  # counted by the backend's tokenizer (else a never-too-low bound)


class BatchRefused(Exception):
    """The whole batch's worst case does not fit in what is left of the budget."""

    def __init__(self, asked: int, left: int, prompts: int, max_tokens_fit: int, fit: int) -> None:
        self.asked, self.left, self.prompts = asked, left, prompts
        self.max_tokens_fit, self.prompts_fit = max_tokens_fit, fit
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = (
            f"These {self.prompts:,} prompts could use up to {self.asked:,} tokens, but only "
            f"{self.left:,} are left in this month's budget."
        )
        fits = []
        if self.max_tokens_fit >= 1:
            fits.append(f"the largest max_tokens that fits every prompt is {self.max_tokens_fit:,}")
        if self.prompts_fit >= 1:
            fits.append(f"the first {self.prompts_fit:,} prompts fit with these settings")
        if not fits:
            return text + " Nothing fits until the budget resets on the 1st (UTC)."
        return text + " Nothing was sent: " + "; ".join(fits) + "."


def plan(body: dict[str, Any], prompts: list[Prompt]) -> Plan:
    """Check every prompt with the door's rules against the chosen model and pin what
    the worst case depends on. Raises ParamsInvalid (the settings), UploadError (a
    prompt, naming its line) or BackendError (the backend cannot say)."""
    model = get_model(body.get("model") or None)
    body = {**body, "model": model.id}
    # The table's mean logprob needs each sampled token's logprob: 0 asks for it alone.
    body.setdefault("logprobs", 0)
    texts = [p.prompt for p in prompts]
    counts = count_tokens(model.id, texts)
    exact = counts is not None
    if counts is None:
        counts = [prompt_token_bound(t) for t in texts]
    if body.get("max_tokens") is None:
        body["max_tokens"] = default_max_tokens(model.max_model_len, max(counts))
    validate_params({**body, "prompt": texts[0]}, model=model)  # the settings' own errors
    for prompt, count in zip(prompts, counts, strict=True):
        try:
            validate_params({**body, "prompt": prompt.prompt}, model=model)
        except ParamsInvalid as exc:
            raise UploadError(exc.errors[0].message, prompt.line) from None
        if exact and model.max_model_len and count + body["max_tokens"] > model.max_model_len:
            raise UploadError(
                f"the prompt is {count:,} tokens: with max_tokens {body['max_tokens']:,} it "
                f"passes the model's context of {model.max_model_len:,} tokens",
                prompt.line,
            )
    return Plan(body, counts, exact)


def check_budget(user: Any, body: dict[str, Any], counts: list[int]) -> None:
    """Refuse, don't clamp: the whole batch's worst case against what is left."""
    n = body.get("n") or 1
    max_tokens = body["max_tokens"]
    asked = sum(counts) + len(counts) * n * max_tokens
    left = usage_summary(user)["remaining"]
    if asked <= left:
        return
    per_prompt = (left - sum(counts)) // (len(counts) * n)
    fit, spent = 0, 0
    for count in counts:
        spent += count + n * max_tokens
        if spent > left:
            break
        fit += 1
    raise BatchRefused(asked, left, len(counts), max(0, min(per_prompt, MAX_OUTPUT_WORK // n)), fit)


def create(
    user: Any, title: str, body: dict[str, Any], prompts: list[Prompt], counts: list[int]
) -> Batch:
    """The batch and all its prompts in one transaction; feeding starts on commit."""
    with transaction.atomic():
        batch = Batch.objects.create(
            owner=user, title=title[:200] or "Untitled batch", params=body, total=len(prompts),
            resumed_at=timezone.now(),
        )  # fmt: skip
        BatchItem.objects.bulk_create(
            [
                BatchItem(
                    batch=batch,
                    index=i,
                    line=p.line,
                    prompt=p.prompt,
                    metadata=p.metadata,
                    prompt_tokens=count,
                )  # fmt: skip
                for i, (p, count) in enumerate(zip(prompts, counts, strict=True))
            ],
            batch_size=1000,
        )
        transaction.on_commit(request_feed)
    log.info("batch %s: %s prompts queued", batch.pk, batch.total)
    return batch


def request_feed() -> None:
    """Feed in a worker (the web process only asks)."""
    current_app.send_task(FEED_TASK, queue=settings.WEFT_GENERATION_QUEUE or None)


# --- feeding --------------------------------------------------------------------------


def feed() -> int:
    """Start pending prompts of running batches while fewer than
    WEFT_BATCH_CONCURRENCY batch generations are in flight. Returns how many started."""
    started = 0
    touched: set[int] = set()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [FEED_LOCK])
        free = (
            settings.WEFT_BATCH_CONCURRENCY
            - BatchItem.objects.filter(state=ItemState.ACTIVE).count()
        )
        batches = list(
            Batch.objects.filter(state=Batch.State.RUNNING)
            .select_related("owner")
            .order_by(F("fed_at").asc(nulls_first=True), "pk")[:100]
        )
        while free > 0 and batches:
            for batch in list(batches):
                if free <= 0:
                    break
                item = batch.items.filter(state=ItemState.PENDING).order_by("index").first()
                if item is None:
                    batches.remove(batch)
                    with transaction.atomic():
                        Batch.objects.select_for_update().get(pk=batch.pk).finish_if_complete()
                    touched.add(batch.pk)
                    continue
                outcome = _start(batch, item)
                touched.add(batch.pk)
                if outcome == "started":
                    free -= 1
                    started += 1
                elif outcome == "stop":
                    batches.remove(batch)
                elif outcome == "backend":
                    free = 0  # the backend is away: beat tries again
    for batch_id in touched:
        transaction.on_commit(lambda b=batch_id: publish(b))
    return started


def _start(batch: Batch, item: BatchItem) -> str:
    body = {**batch.params, "prompt": item.prompt}
    target = {"batch": batch.pk, "item": item.pk}
    try:
        with transaction.atomic():
            generation = pipeline.start(
                batch.owner, body, kind=KIND, target=target, workload="batch"
            )
            # The batch keeps the result: never listed under the Workbench's Recover.
            Generation.objects.filter(pk=generation.pk).update(claimed_at=timezone.now())
            BatchItem.objects.filter(pk=item.pk).update(
                state=ItemState.ACTIVE, generation=generation, attempts=F("attempts") + 1,
                prompt_tokens=generation.prompt_tokens,
            )  # fmt: skip
            Batch.objects.filter(pk=batch.pk).update(fed_at=timezone.now())
    except BudgetRefused as refusal:
        log.info("batch %s: paused, budget refused item %s", batch.pk, item.index)
        batch.pause(reason=f"The budget ran out: {refusal.message} Resume when it fits.")
        return "stop"
    except ParamsInvalid as exc:  # e.g. the model is no longer served
        _fail(item, "invalid_request", "; ".join(f"{e.field}: {e.message}" for e in exc.errors))
        return "failed"
    except BackendError as exc:
        log.warning("batch %s: backend unavailable (%s); feeding later", batch.pk, exc.code)
        return "backend"
    return "started"


def _fail(item: BatchItem, code: str, message: str) -> None:
    BatchItem.objects.filter(pk=item.pk).update(
        state=ItemState.FAILED, error_code=code, error_message=clean_text(message, 2000),
        finished_at=timezone.now(),
    )  # fmt: skip


# --- results --------------------------------------------------------------------------


def sample_summary(choice: dict[str, Any], usage: dict | None, n: int) -> dict[str, Any]:
    logprobs = choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else None
    count, mean = logprob_stats(logprobs)
    if count is None:
        count = choice.get("completion_tokens")
    if count is None and n == 1 and isinstance(usage, dict):
        count = usage.get("completion_tokens")
    return {
        "text": choice.get("text") or "",
        "finish_reason": choice.get("finish_reason") or "",
        "tokens": count if type(count) is int else None,
        "mean_logprob": mean if mean is None or math.isfinite(mean) else None,
    }


def _outcome(generation: Generation, attempts: int) -> str:
    State = Generation.State
    if generation.state == State.DONE:
        return ItemState.DONE
    if generation.state == State.CANCELLED and generation.error_code != "deleted":
        return ItemState.CANCELLED
    if generation.error_code == "worker_lost" and attempts < MAX_ATTEMPTS:
        return ItemState.PENDING  # a restart or a killed worker: send it again
    return ItemState.FAILED


def record(generation: Generation) -> int | None:
    """Copy a finished batch generation's samples into its item, once. Returns the
    batch id when it recorded something."""
    target = generation.target if isinstance(generation.target, dict) else {}
    if generation.workload != "batch" or not generation.is_terminal or "item" not in target:
        return None
    with transaction.atomic():
        batch = Batch.objects.select_for_update().filter(pk=target.get("batch")).first()
        item = (
            BatchItem.objects.select_for_update()
            .filter(
                pk=target["item"], batch=batch, generation_id=generation.pk, state=ItemState.ACTIVE
            )  # fmt: skip
            .first()
        )
        if batch is None or item is None:
            return None
        choices = sorted(generation.choices or [], key=lambda c: c.get("index", 0))
        n = (generation.params or {}).get("n") or 1
        item.samples = [sample_summary(c, generation.usage, n) for c in choices]
        usage = generation.usage if isinstance(generation.usage, dict) else {}
        tokens = usage.get("completion_tokens")
        if not isinstance(tokens, int):
            tokens = sum(s["tokens"] or 0 for s in item.samples)
        item.completion_tokens = tokens
        item.served_model = generation.served_model
        item.error_code = generation.error_code
        item.error_message = generation.error_message
        item.state = _outcome(generation, item.attempts)
        item.finished_at = None if item.state == ItemState.PENDING else timezone.now()
        if item.state == ItemState.PENDING:
            item.generation = None
        item.save()
        batch.completion_tokens += tokens
        batch.save(update_fields=["completion_tokens"])
        batch.finish_if_complete()
    return batch.pk


def on_generation_finished(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """The door's signal, in whichever process finished the run (usually the worker):
    record the row, tell the page, and give the freed slot to the next prompt."""
    if generation.workload != "batch":
        return
    try:
        batch_id = record(generation)
        if batch_id is not None:
            publish(batch_id)
            feed()
    except Exception:  # never break the worker: beat's sweep records and feeds later
        log.exception("generation %s: batch bookkeeping failed", generation.pk)


def sweep() -> dict[str, int]:
    """Beat: record finished generations whose signal was lost, fail rows whose
    generation is gone, then feed (after a restart this is what resumes batches)."""
    recorded = failed = 0
    active = BatchItem.objects.filter(state=ItemState.ACTIVE, batch__state__in=[
        Batch.State.RUNNING, Batch.State.PAUSED, Batch.State.CANCELLED])  # fmt: skip
    for item in active.filter(generation__state__in=Generation.TERMINAL).select_related(
        "generation"
    ):
        if record(item.generation) is not None:
            recorded += 1
            publish(item.batch_id)
    for item in active.filter(generation__isnull=True):
        _fail(item, "deleted", "The run's checkpoint was deleted before it finished.")
        failed += 1
    return {"recorded": recorded, "failed": failed, "started": feed()}


# --- what the user asks ---------------------------------------------------------------


def cancel(batch: Batch) -> None:
    """Cancel the prompts not sent yet and, through the door, the ones in flight (they
    keep what they generated)."""
    for generation in Generation.objects.filter(pk__in=batch.cancel()):
        if not generation.is_terminal:
            lifecycle.cancel(generation)
    publish(batch.pk)


def resume(batch: Batch) -> bool:
    if batch.resume():
        transaction.on_commit(request_feed)
        publish(batch.pk)
        return True
    return False


def retry(user: Any, batch: Batch, items: Any) -> int:
    """Failed rows again, after the same budget check as an upload (BatchRefused)."""
    failed = items.filter(batch=batch, state=ItemState.FAILED)
    counts = list(failed.values_list("prompt_tokens", flat=True))
    if not counts:
        return 0
    check_budget(user, batch.params, counts)
    count = batch.retry(failed)
    transaction.on_commit(request_feed)
    publish(batch.pk)
    return count


def publish(batch_id: int) -> None:
    """Tell the batch's pages that its progress changed (they re-read it)."""
    try:
        async_to_sync(get_channel_layer().group_send)(
            group_name(batch_id), {"type": "batch.progress"}
        )
    except Exception:  # a page missing an update catches up with the next one
        log.exception("batch %s: could not publish progress", batch_id)
