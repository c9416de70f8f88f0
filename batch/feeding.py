"""Running a batch on the pages' own pipeline.

Each prompt becomes one of the door's Generations (kind "workbench", workload
"batch", so the door sends `X-Acs-Workload: batch`), started with
completions.pipeline.start — validated, its worst case reserved, enqueued on commit —
and executed by the ordinary Celery workers with the door's claim / checkpoint /
settle machinery. The Workbench can therefore open any row as it opens any run.

Bounded concurrency: at most WEFT_BATCH_CONCURRENCY batch generations are queued or
running at once, over every user's batches (a slot goes round the users with running
batches in turn, then round each user's batches). They run on the bulk worker pool
(config.lanes), beside API jobs, owners taking turns there too (completions.scheduler),
so a page run never waits behind them. Feeding happens when a batch starts, each time one of its generations
finishes (in the worker, on the door's generation_finished signal), and every few
seconds from beat (`batch.tasks.sweep_batches`), which also resumes feeding after a
restart and records any finished generation a lost signal left unrecorded.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from batch.models import Batch, BatchItem
from batch.uploads import Prompt, UploadError
from completions import budget, lifecycle, pipeline, scheduler
from completions.budget import BudgetRefused
from completions.client import count_tokens, get_model, prompt_token_bound
from completions.errors import BackendError, clean_text
from completions.models import Generation
from completions.schema import MAX_OUTPUT_WORK, ParamsInvalid, default_max_tokens, validate_params
from completions.streaming import publish_soon
from config import lanes
from core.tokens import logprob_stats

log = logging.getLogger(__name__)
KIND = "workbench"  # the Workbench opens a batch row like any of its runs
FEED_TASK = "batch.tasks.feed_batches"
COUNT_CHUNK, COUNT_THREADS = 250, 4
ItemState = BatchItem.State
Lane = Generation.Lane


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
    counts = _count(model.id, texts)
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


def _count(model_id: str, texts: list[str]) -> list[int] | None:
    """Every prompt's exact token count, or None when the backend cannot count. The
    backend's /tokenize takes one prompt: a few chunks in parallel keep 10,000 prompts
    to seconds."""
    chunks = [texts[i : i + COUNT_CHUNK] for i in range(0, len(texts), COUNT_CHUNK)]
    with ThreadPoolExecutor(min(COUNT_THREADS, len(chunks))) as pool:
        results = list(pool.map(lambda chunk: count_tokens(model_id, chunk), chunks))
    if any(r is None for r in results):
        return None
    return [count for result in results for count in result or []]


def check_budget(user: Any, body: dict[str, Any], counts: list[int]) -> None:
    """Refuse, don't clamp: the whole batch's worst case against what is left, checked
    under the budget's lock by the ledger's own rule (completions.budget.admit). Nothing
    is held: each prompt reserves its own as it is fed (and the batch pauses if other
    runs spent the budget meanwhile)."""
    n = body.get("n") or 1
    try:
        with transaction.atomic():
            budget.admit(
                user, prompt_tokens=sum(counts), choices=len(counts) * n,
                max_tokens=body["max_tokens"],
            )  # fmt: skip
    except BudgetRefused as refusal:
        fit, spent = 0, 0
        for count in counts:
            spent += count + n * body["max_tokens"]
            if spent > refusal.left:
                break
            fit += 1
        per_prompt = max(0, min(refusal.fit, MAX_OUTPUT_WORK // n))
        raise BatchRefused(refusal.asked, refusal.left, len(counts), per_prompt, fit) from None


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
    queue = lanes.queue_name(lanes.MAINTENANCE_POOL, settings.WEFT_GENERATION_QUEUE)
    current_app.send_task(FEED_TASK, queue=queue)


# --- feeding --------------------------------------------------------------------------
#
# Two ways a prompt starts. A finished prompt hands its slot straight to the next
# pending one, in the same transaction that records it (net zero in flight, so the
# bound holds without a global lock, and the slot is never idle waiting for one).
# feed() fills slots from scratch under the scheduler's admission lock (counting what is
# in flight): when a batch starts, resumes or retries, and from beat's sweep.


def feed() -> int:
    """Start pending prompts of running batches while fewer than
    WEFT_BATCH_CONCURRENCY batch generations are in flight, one transaction per
    prompt (its Celery message goes out at once). Returns how many started."""
    started = 0
    while True:
        with transaction.atomic():
            scheduler.admission_lock("batch")
            in_flight = BatchItem.objects.filter(state=ItemState.ACTIVE).count()
            if in_flight >= settings.WEFT_BATCH_CONCURRENCY or not _start_next():
                break
        started += 1
    return started


def _start_next(exclude_batch: int | None = None) -> bool:
    """Start the next pending prompt: owners in the scheduler's turn order
    (completions.scheduler.owners_in_turn: the fewest runs in flight on the batch lane,
    then served longest ago — so a user with many batches gets no more slots than a
    user with one), then that user's batch fed longest ago. Pending rows are taken with
    SKIP LOCKED: two starters never take the same prompt, and neither waits for the
    other."""
    running = Batch.objects.filter(state=Batch.State.RUNNING)
    owners = list(running.order_by().values_list("owner_id", flat=True).distinct())
    rank = {owner: i for i, owner in enumerate(scheduler.owners_in_turn(Lane.BATCH, owners))}
    batches = sorted(
        running.select_related("owner").order_by(F("fed_at").asc(nulls_first=True), "pk")[:200],
        key=lambda b: rank.get(b.owner_id, len(rank)),
    )  # stable: inside an owner, its batch fed longest ago first
    for batch in batches[:50]:
        item = (
            batch.items.select_for_update(skip_locked=True)
            .filter(state=ItemState.PENDING)
            .order_by("index")
            .first()
        )
        if item is None:
            finish_if_complete(batch.pk)
            continue
        outcome = _start(batch, item)
        if outcome == "started":
            return True
        if outcome == "backend":
            return False  # the backend is away: beat tries again
    return False


def _start(batch: Batch, item: BatchItem) -> str:
    body = {**batch.params, "prompt": item.prompt}
    target = {"batch": batch.pk, "item": item.pk}
    try:
        with transaction.atomic():
            # Counted at upload: the backend is not asked again for every prompt.
            # Not streamed: nobody watches a batch prompt's tokens, and a JSON answer
            # costs the worker no per-token publishing (so cancel stops the prompts not
            # sent; one in flight finishes, and is kept).
            generation = pipeline.start(
                batch.owner, body, kind=KIND, target=target, workload="batch", stream=False,
                prompt_tokens=[item.prompt_tokens],
            )  # fmt: skip
            # The batch keeps the result: never listed under the Workbench's Recover.
            Generation.objects.filter(pk=generation.pk).update(claimed_at=timezone.now())
            sent = {k: v for k, v in generation.params.items() if k != "prompt"}
            BatchItem.objects.filter(pk=item.pk).update(
                state=ItemState.ACTIVE, generation=generation, attempts=F("attempts") + 1,
                prompt_tokens=generation.prompt_tokens, sent=sent,
            )  # fmt: skip
    except BudgetRefused as refusal:
        log.info("batch %s: paused, budget refused item %s", batch.pk, item.index)
        batch.pause(reason=f"The budget ran out: {refusal.message} Resume when it fits.")
        transaction.on_commit(lambda: publish(batch.pk))
        return "stop"
    except ParamsInvalid as exc:  # e.g. the model is no longer served
        _fail(item, "invalid_request", "; ".join(f"{e.field}: {e.message}" for e in exc.errors))
        return "failed"
    except BackendError as exc:
        log.warning("batch %s: backend unavailable (%s); feeding later", batch.pk, exc.code)
        return "backend"
    # Outside the transaction: the batch row is not held locked by every start.
    transaction.on_commit(lambda: Batch.objects.filter(pk=batch.pk).update(fed_at=timezone.now()))
    return "started"


def _fail(item: BatchItem, code: str, message: str) -> None:
    BatchItem.objects.filter(pk=item.pk).update(
        state=ItemState.FAILED, error_code=code, error_message=clean_text(message, 2000),
        finished_at=timezone.now(),
    )  # fmt: skip


def finish_if_complete(batch_id: int) -> None:
    """Mark the batch done when nothing is pending or in flight (checked without a
    lock first: most calls find work left)."""
    open_items = BatchItem.objects.filter(
        batch_id=batch_id, state__in=[ItemState.PENDING, ItemState.ACTIVE]
    )
    if open_items.exists():
        return
    with transaction.atomic():
        batch = Batch.objects.select_for_update().filter(pk=batch_id).first()
        if batch is not None and batch.finish_if_complete():
            transaction.on_commit(lambda: publish(batch_id))


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


def _outcome(generation: Generation) -> str:
    # A prompt whose worker died was already run again by the door (the batch lane's
    # policy: two attempts); here it has ended for good.
    State = Generation.State
    if generation.state == State.DONE:
        return ItemState.DONE
    if generation.state == State.CANCELLED and generation.error_code != "deleted":
        return ItemState.CANCELLED
    return ItemState.FAILED


def record(generation: Generation, *, hand_off: bool = False) -> int | None:
    """Copy a finished batch generation's samples into its item, once; with
    `hand_off`, start the next pending prompt in the same transaction. Returns the
    batch id when it recorded something."""
    target = generation.target if isinstance(generation.target, dict) else {}
    if generation.workload != "batch" or not generation.is_terminal or "item" not in target:
        return None
    with transaction.atomic():
        item = (
            BatchItem.objects.select_for_update()
            .filter(pk=target["item"], generation_id=generation.pk, state=ItemState.ACTIVE)
            .first()
        )
        if item is None:
            return None
        choices = sorted(generation.choices or [], key=lambda c: c.get("index", 0))
        n = (generation.params or {}).get("n") or 1
        item.samples = [sample_summary(c, generation.usage, n) for c in choices]
        usage = generation.usage if isinstance(generation.usage, dict) else {}
        tokens = usage.get("completion_tokens")
        if type(tokens) is not int or tokens < 0:
            tokens = sum(s["tokens"] or 0 for s in item.samples)
        item.completion_tokens = tokens
        item.served_model = generation.served_model
        item.error_code = generation.error_code
        item.error_message = generation.error_message
        item.state = _outcome(generation)
        item.finished_at = timezone.now()
        item.save()
        if hand_off and not _start_next():
            transaction.on_commit(lambda: finish_if_complete(item.batch_id))
    return item.batch_id


def on_generation_finished(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """The door's signal, in whichever process finished the run (usually the worker):
    record the row and hand its slot to the next prompt, then tell the page."""
    if generation.workload != "batch":
        return
    try:
        batch_id = record(generation, hand_off=True)
        if batch_id is not None:
            publish(batch_id)
    except Exception:  # never break the worker: beat's sweep records and feeds later
        log.exception("generation %s: batch bookkeeping failed", generation.pk)


def sweep() -> dict[str, int]:
    """Beat: record finished generations whose signal was lost, fail rows whose
    generation is gone, then feed (after a restart this is what resumes batches)."""
    recorded = failed = 0
    active = BatchItem.objects.filter(state=ItemState.ACTIVE)
    for item in active.filter(generation__state__in=Generation.TERMINAL).select_related(
        "generation"
    ):
        if item.generation is not None and record(item.generation) is not None:
            recorded += 1
            publish(item.batch_id)
    for item in active.filter(generation__isnull=True):
        _fail(item, "deleted", "The run's checkpoint was deleted before it finished.")
        failed += 1
    for batch_id in Batch.objects.filter(state__in=[Batch.State.RUNNING, Batch.State.PAUSED]
                                         ).values_list("pk", flat=True):  # fmt: skip
        finish_if_complete(batch_id)
    return {"recorded": recorded, "failed": failed, "started": feed()}


# --- what the user asks ---------------------------------------------------------------


def cancel(batch: Batch) -> None:
    """Cancel the prompts not sent yet, and through the door the ones still queued in
    Celery; a prompt already at the backend finishes and is kept (batch prompts are
    not streamed, so there is no stream to close)."""
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
    """Tell the batch's pages that its progress changed (they re-read it). Does not
    wait: a page missing an update catches up with the next one."""
    try:
        publish_soon(group_name(batch_id), {"type": "batch.progress"})
    except Exception:
        log.exception("batch %s: could not publish progress", batch_id)
