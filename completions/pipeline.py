"""The generation pipeline: start (validate, reserve, enqueue), execute (the worker's
turn: claim the fairest run of its queue, then stream → checkpoint → channel group, or
the kind's own executor) and run_now (synchronous, non-streaming, for Inspect).
Finishing once and the other state moves are completions.lifecycle's; which run a
worker takes is completions.scheduler's.

Safety on redelivery: a worker claims a queued row by writing a fresh run_token under
a row lock; every later write is guarded by that token and `state = 'running'`, and
settlement happens inside the one transaction that moves the row to a terminal state.
A second delivery therefore claims another queued run, or nothing.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, connections, transaction
from django.utils import timezone

from completions import budget, registry, scheduler
from completions.client import (
    BackendClient,
    Completion,
    Workload,
    count_tokens,
    get_model,
    prompt_token_bound,
)
from completions.errors import (
    MESSAGE_MAX,
    MODEL_MAX,
    REQUEST_ID_MAX,
    BackendError,
    Clamped,
    ModelNotFound,
    UpstreamError,
    clean_text,
)
from completions.lifecycle import enqueue, finish
from completions.models import Generation, empty_choice
from completions.schema import (
    CompletionParams,
    FieldError,
    ModelInfo,
    ParamsInvalid,
    StreamOptions,
    default_max_tokens,
    validate_params,
)
from completions.streaming import GroupPublisher, state_message
from core import logs

log = logging.getLogger(__name__)
State = Generation.State
# How long the worker keeps trying to save a finished run while the database is away
# (a Postgres restart or failover takes seconds): the text is only in memory meanwhile.
FINAL_SAVE_PATIENCE = 60.0


def _close_thread_connections() -> None:
    """Drop this thread's database connections so the next query opens a fresh one."""
    try:
        connections.close_all()
    except Exception:  # closing a connection the server already dropped may raise
        log.debug("closing a broken connection failed", exc_info=True)


def with_db_retry[T](action: Callable[[], T], what: str, patience: float) -> T:
    """Run `action`; on a dropped connection (OperationalError/InterfaceError) retry
    with a fresh connection for up to `patience` seconds. Never inside a transaction
    opened by the caller: its earlier work is gone with the connection."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return action()
        except (OperationalError, InterfaceError) as exc:
            if connection.in_atomic_block or time.monotonic() >= deadline:
                raise
            log.warning("%s: database unavailable (%s); retrying", what, type(exc).__name__)
            _close_thread_connections()
            time.sleep(0.5)


# --- planning: the pieces every caller composes (this prepare, the /v1 proxy's plan) ----


def needs_count(params: CompletionParams) -> bool:
    """Whether a plan needs the prompt's exact count: the injected max_tokens depends on
    it, and so does prompt_logprobs=-1's length rule."""
    return params.max_tokens is None or params.prompt_logprobs == -1


def with_counts(
    data: dict, model: ModelInfo, params: CompletionParams, counted: list[int] | None
) -> tuple[CompletionParams, list[int], bool]:
    """The params and the prompt counts to plan with: `counted` (exact, from the
    backend or the caller) re-checked against prompt_logprobs=-1's length rule, which a
    text prompt's count decides; else never-too-low bounds. Returns (params, counts,
    exact). Raises ParamsInvalid."""
    texts = not all(isinstance(p, list) for p in params.prompts)
    if counted is not None and texts and params.prompt_logprobs == -1:
        params = validate_params(data, model=model, prompt_tokens=counted)
    if counted is None:
        return params, [prompt_token_bound(p) for p in params.prompts], not texts
    return params, counted, True


def max_tokens_for(
    params: CompletionParams, model: ModelInfo, counts: list[int]
) -> tuple[int, str]:
    """max_tokens as asked ("client"), or the wrapper's injected default ("default")."""
    if params.max_tokens is not None:
        return params.max_tokens, "client"
    return default_max_tokens(model.max_model_len, max(counts)), "default"


class Checked(dict):
    """A request body its form already validated against `model` (completions.forms):
    prepare() takes its params as they are instead of validating it again — while the
    body is still the one that was checked."""

    def __init__(self, body: dict, params: CompletionParams, model: ModelInfo) -> None:
        super().__init__(body)
        self.params = params
        self.model = model

    def valid_params(self, model: ModelInfo) -> CompletionParams | None:
        body = {k: v for k, v in self.items() if v is not None}
        if model != self.model or self.params.to_body() != body:
            return None
        return self.params.model_copy(update={"model": model.id})

    def with_changes(self, **changes: Any) -> Checked:
        """The same body with fields of ours set (values valid by construction)."""
        return Checked({**self, **changes}, self.params.model_copy(update=changes), self.model)


def prepare(
    data: dict, *, stream: bool, prompt_tokens: list[int] | None = None
) -> tuple[CompletionParams, int]:
    """Validate against the resolved model and pin everything the reservation depends
    on: the model id, and max_tokens (the wrapper's injected default when omitted —
    sending it explicitly means the backend never picks a larger one than we reserved).
    Returns the params and the prompt token count (exact, or a never-too-low bound).
    `prompt_tokens`: counts the caller already has (a batch counted at upload), one per
    prompt, exact or never too low; then the backend is not asked again. Validated once
    (a Checked body not at all), again only for what a pinned value or the prompt's
    count can change."""
    checked = data if isinstance(data, Checked) else None
    data = dict(data)
    try:
        model = get_model(data.get("model") if isinstance(data.get("model"), str) else None)
    except ModelNotFound as exc:
        raise ParamsInvalid([FieldError("model_not_found", "model", exc.message)]) from None
    if data.get("model") is None:
        data["model"] = model.id
    params = checked.valid_params(model) if checked is not None else None
    if params is None:
        params = validate_params(data, model=model)
    counted = prompt_tokens if prompt_tokens is not None else count_tokens(model.id, params.prompt)
    params, counts, _ = with_counts(data, model, params, counted)
    max_tokens, source = max_tokens_for(params, model, counts)
    body = params.to_body()
    body["max_tokens"] = max_tokens
    if stream:
        body["stream"] = True
        body["stream_options"] = {**body.get("stream_options", {}), "include_usage": True}
    else:
        body.pop("stream_options", None)
        body["stream"] = False
    if source == "default" or (stream and params.prompt_logprobs not in (None, 0)):
        # A value of ours under the rules of the rest, or a stream the rules refuse.
        params = validate_params(body, model=model)
    else:  # only transport fields changed, to values valid by construction
        options = body.get("stream_options")
        params = params.model_copy(
            update={
                "max_tokens": max_tokens,
                "stream": body["stream"],
                "stream_options": StreamOptions(**options) if options else None,
            }
        )
    return params, sum(counts)


# Below 2**31 with room for n: backends seed a 32-bit generator with seed + sample index
# (vLLM's children of an n > 1 request, the local engine), and a short number reads well.
SEED_LIMIT = 2**31 - 2**10


def new_seed() -> int:
    return secrets.randbelow(SEED_LIMIT)


def _reserve_and_create(
    user: Any,
    params: CompletionParams,
    prompt_tokens: int,
    *,
    state: str,
    hold: str | None = None,
    **fields: Any,
) -> Generation:
    asked = prompt_tokens + params.worst_case_output
    month = budget.reserve(
        user, asked, prompt_tokens=prompt_tokens, choice_count=params.choice_count, hold=hold
    )
    lane = scheduler.lane_for(fields["kind"], fields.get("workload", "interactive"))
    return Generation.objects.create(
        owner=user,
        params=params.to_body(),
        state=state,
        choices=[empty_choice(i) for i in range(params.choice_count)],
        prompt_tokens=prompt_tokens,
        reserved_tokens=asked,
        budget_month=month,
        lane=lane,
        queue=scheduler.queue_for(lane),
        **fields,
    )


def start(
    user: Any,
    data: dict,
    *,
    kind: str,
    target: dict | None = None,
    workload: Workload = "interactive",
    stream: bool = True,
    record_refusal: bool = False,
    draw_seed: bool = True,
    prompt_tokens: list[int] | None = None,
    hold: str | None = None,
) -> Generation:
    """Validate, reserve and enqueue a page's run. Without a seed the door draws one
    (`draw_seed`), sends it and records it in the generation's params, so the same
    request again reproduces the run exactly (a Re-run, a node's recorded seed).
    `hold`: the reservation is drawn from that hold (completions.budget.admit)."""
    if draw_seed and data.get("seed") is None:
        seed = new_seed()
        data = data.with_changes(seed=seed) if isinstance(data, Checked) else {**data, "seed": seed}
    params, prompt_count = prepare(data, stream=stream, prompt_tokens=prompt_tokens)
    try:
        with transaction.atomic():
            generation = _reserve_and_create(
                user,
                params,
                prompt_count,
                state=State.QUEUED,
                kind=kind,
                target=target,
                workload=workload,
                hold=hold,
            )
            transaction.on_commit(lambda: enqueue(generation))
    except budget.BudgetRefused as refusal:
        log.info(
            "user %s: run refused by budget (asked %s, left %s)",
            user.pk,
            refusal.asked,
            refusal.left,
        )
        if record_refusal:
            Generation.objects.create(
                owner=user,
                kind=kind,
                target=target,
                workload=workload,
                params=params.to_body(),
                state=State.REFUSED,
                choices=[],
                error_code=refusal.code,
                error_message=refusal.message,
                finished_at=timezone.now(),
            )
        raise
    log.info("generation %s queued (%s, %s choices)", generation.pk, kind, params.choice_count)
    return generation


# --- the worker ----------------------------------------------------------------------


class Accumulator:
    """The choices as they stream in; shared with the checkpoint thread under a lock."""

    def __init__(self, choices: list[dict[str, Any]], prompt_tokens: int) -> None:
        self.lock = threading.Lock()
        self.choices = choices
        self.counts = [0] * len(choices)
        self.prompt_tokens = prompt_tokens
        self.usage: dict[str, Any] | None = None
        self.request_id = ""
        self.model = ""
        self.dirty = False

    def add(self, choice: dict[str, Any]) -> tuple[int, str]:
        index = choice.get("index") or 0
        text = choice.get("text") or ""
        # The backend is trusted for tokens, not for shapes: an index past the choices
        # asked for would grow the row without bound.
        if (
            type(index) is not int
            or not 0 <= index < len(self.choices)
            or not isinstance(text, str)
        ):
            raise UpstreamError("bad_stream", "the backend sent a malformed choice", 200)
        with self.lock:
            target = self.choices[index]
            target["text"] += text
            if choice.get("finish_reason") is not None:
                target["finish_reason"] = choice["finish_reason"]
                target["stop_reason"] = choice.get("stop_reason")
            logprobs = choice.get("logprobs")
            if logprobs:
                merged = target["logprobs"] or {
                    "tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []
                }  # fmt: skip
                for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
                    merged[key].extend(logprobs.get(key) or [])
                target["logprobs"] = merged
            if choice.get("prompt_logprobs") is not None:
                target["prompt_logprobs"] = choice["prompt_logprobs"]
            if text or logprobs:
                self.counts[index] += len(logprobs.get("tokens") or [1]) if logprobs else 1
            self.dirty = True
        return index, text

    def set_body(self, body: dict[str, Any]) -> None:
        choices = body.get("choices")
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise UpstreamError("bad_response", "the backend sent no list of choices", 200)
        with self.lock:
            for choice in choices:
                index = choice.get("index") or 0
                if type(index) is not int or not 0 <= index < len(self.choices):
                    raise UpstreamError("bad_response", "the backend sent a malformed choice", 200)
                self.choices[index] = {**empty_choice(index), **choice}
            self.usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
            self.model = clean_text(body.get("model"), MODEL_MAX)

    def usage_now(self) -> dict[str, Any]:
        if self.usage:
            return dict(self.usage)
        completion = sum(self.counts)
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
            "estimated": True,
        }

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            choices = []
            for index, choice in enumerate(self.choices):
                copy = dict(choice)
                streamed = self.counts[index] if index < len(self.counts) else 0
                if streamed:
                    # One streamed chunk carries one token per choice, so this is the
                    # per-sample count a page can show when no logprobs were asked.
                    copy["completion_tokens"] = streamed
                if copy.get("logprobs"):
                    copy["logprobs"] = {k: list(v) for k, v in copy["logprobs"].items()}
                choices.append(copy)
            self.dirty = False
            return {"choices": choices, "usage": self.usage_now()}


class Checkpointer(threading.Thread):
    """Writes the checkpoint and the heartbeat every `interval` seconds while the
    main thread streams, and notices a cancel request or a lost claim. A separate
    thread so a stalled backend still beats (and is not taken for a dead worker)."""

    def __init__(
        self,
        generation_id: int,
        run_token: str,
        acc: Accumulator,
        interval: float,
        give_up_after: float | None = None,
    ) -> None:
        super().__init__(name=f"checkpoint-{generation_id}", daemon=True)
        self.generation_id = generation_id
        self.run_token = run_token
        self.acc = acc
        self.interval = interval
        # Past half the stale limit without a beat, the stale sweep is about to take the
        # run for dead: the main loop then stops the stream and saves what it has.
        self.give_up_after = (
            settings.WEFT_GENERATION_STALE_SECONDS / 2 if give_up_after is None else give_up_after
        )
        self.stopping = threading.Event()
        self.cancelled = threading.Event()
        self.lost = threading.Event()
        self.failed = threading.Event()

    def run(self) -> None:
        last_beat = time.monotonic()
        try:
            while not self.stopping.wait(self.interval):
                try:
                    self.beat()
                    last_beat = time.monotonic()
                except Exception as exc:
                    # One failed write must not end the heartbeat: a dropped connection
                    # (Postgres restarted) is retried next time on a fresh one.
                    self.acc.dirty = True
                    _close_thread_connections()
                    if time.monotonic() - last_beat >= self.give_up_after:
                        log.error(
                            "generation %s: checkpoint failing for %.1f s (%s); giving up",
                            self.generation_id, time.monotonic() - last_beat, type(exc).__name__,
                        )  # fmt: skip
                        self.failed.set()
                        return
                    log.warning(
                        "generation %s: checkpoint failed (%s); retrying",
                        self.generation_id, type(exc).__name__,
                    )  # fmt: skip
        finally:
            _close_thread_connections()  # this thread's connections only

    def beat(self) -> None:
        rows = Generation.objects.filter(
            pk=self.generation_id, state=State.RUNNING, run_token=self.run_token
        )
        fields: dict[str, Any] = {"updated_at": timezone.now()}
        if self.acc.dirty:
            fields.update(self.acc.snapshot())
            fields["request_id"] = clean_text(self.acc.request_id, REQUEST_ID_MAX)
        if not rows.update(**fields):
            self.lost.set()
            return
        if Generation.objects.filter(pk=self.generation_id, cancel_requested=True).exists():
            self.cancelled.set()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


def execute(message_id: int, queue: str | None = None) -> None:
    """A worker's turn on `queue` (the Celery task's body): claim the fairest queued run
    there — not necessarily the one whose message this is — and run it."""
    if not queue:  # a message sent before runs had queues: the named run's queue
        queue = Generation.objects.filter(pk=message_id).values_list("queue", flat=True).first()
        if not queue:
            return
    run_token = uuid.uuid4().hex
    generation = with_db_retry(
        lambda: scheduler.claim_next(queue, run_token), f"queue {queue}: claim", 30.0
    )
    if generation is None:
        log.info("queue %s: nothing left to claim (message %s)", queue, message_id)
        return
    # The log lines from here on are the claimed run's (not the message's).
    logs.bind(
        run_id=f"job-{generation.public_id}"
        if generation.public_id
        else f"generation-{generation.pk}"
    )
    run = registry.executor(generation.kind) or _stream
    try:
        run(generation, run_token)
    except Exception as exc:  # a bug must still end the run, not leave it "running"
        log.exception("generation %s failed unexpectedly", generation.pk)
        _fail_unexpectedly(generation, run_token, type(exc).__name__)


def _fail_unexpectedly(generation: Generation, run_token: str, name: str) -> None:
    with_db_retry(
        lambda: finish(generation, State.FAILED, run_token=run_token,
                       error_code="internal_error", error_message=name),
        f"generation {generation.pk}: final save", FINAL_SAVE_PATIENCE,
    )  # fmt: skip


def _stream(generation: Generation, run_token: str) -> None:
    """A page's run or a Batch prompt: the backend's stream (or JSON answer) into the
    checkpoint, its tokens to the run's channel group."""
    publisher = GroupPublisher(generation.pk)
    publisher.send(state_message(generation))
    acc = Accumulator(list(generation.choices), generation.prompt_tokens)
    checkpointer = Checkpointer(
        generation.pk, run_token, acc, settings.WEFT_CHECKPOINT_INTERVAL_SECONDS
    )
    checkpointer.start()
    outcome: dict[str, Any] = {"state": State.DONE}
    try:
        params = CompletionParams.model_validate(generation.params)
        workload: Workload = "batch" if generation.workload == "batch" else "interactive"
        with BackendClient(workload) as client:
            if params.stream:
                with client.stream(params) as chunks:
                    acc.request_id = chunks.request_id
                    for chunk in chunks:
                        for choice in chunk.get("choices") or []:
                            index, text = acc.add(choice)
                            publisher.token(index, text, choice.get("logprobs"))
                        if chunk.get("usage"):
                            acc.usage = chunk["usage"]
                        if checkpointer.cancelled.is_set() or checkpointer.lost.is_set():
                            # Leaving the `with` closes the connection: the backend stops.
                            outcome = {"state": State.CANCELLED}
                            break
                        if checkpointer.failed.is_set():
                            # Nothing reaches the database any more: stop generating
                            # and save what arrived (kept, marked interrupted).
                            outcome = {
                                "state": State.INTERRUPTED,
                                "error_code": "checkpoint_failed",
                                "error_message": "The run's progress could not be saved; "
                                "it was stopped and what arrived was kept.",
                            }
                            break
                    acc.model = chunks.model
            else:
                completion = client.complete(params)
                acc.request_id = completion.request_id
                acc.set_body(completion.body)
    except Clamped as exc:
        outcome = _error_outcome(State.REFUSED, exc)
        acc.usage = None
        acc.counts = [0] * len(acc.counts)  # nothing was read: release the reservation
    except BackendError as exc:
        outcome = _error_outcome(State.FAILED, exc)
    except Exception as exc:  # a bug must still end the run, not leave it "running"
        log.exception("generation %s failed unexpectedly", generation.pk)
        outcome = {
            "state": State.FAILED,
            "error_code": "internal_error",
            "error_message": type(exc).__name__,
        }
    finally:
        checkpointer.stop()
        publisher.close()
    if outcome["state"] == State.FAILED and not acc.request_id:
        outcome.setdefault("request_id", "")
    snapshot = acc.snapshot()
    state = outcome.pop("state")
    fields = {
        "choices": snapshot["choices"],
        "usage": snapshot["usage"],
        "request_id": clean_text(outcome.pop("request_id", "") or acc.request_id, REQUEST_ID_MAX),
        "served_model": acc.model,
        **outcome,
    }
    # The text is only in this process now: wait out a database restart to save it.
    with_db_retry(
        lambda: finish(generation, state, run_token=run_token, **fields),
        f"generation {generation.pk}: final save",
        FINAL_SAVE_PATIENCE,
    )


def _error_outcome(state: str, exc: BackendError) -> dict[str, Any]:
    return {
        "state": state,
        "error_code": exc.code,
        "error_message": clean_text(exc.message, MESSAGE_MAX, one_line=False),
        "request_id": exc.request_id,
        "retry_after_seconds": None if exc.retry_after is None else math.ceil(exc.retry_after),
    }


def run_now(
    user: Any,
    data: dict,
    *,
    kind: str = "inspect",
    workload: Workload = "interactive",
    complete: Callable[[BackendClient, CompletionParams], Completion] | None = None,
) -> Generation:
    """Reserve, call the backend in this request (no streaming), settle; returns the
    generation done, failed or refused. Raises ParamsInvalid / BudgetRefused like start.
    `complete` reads the answer instead of client.complete (Inspect's full-vocabulary
    reader keeps only what the page shows of a body too big to hold)."""
    params, prompt_tokens = prepare(data, stream=False)
    run_token = uuid.uuid4().hex
    with transaction.atomic():
        generation = _reserve_and_create(
            user, params, prompt_tokens, state=State.RUNNING, kind=kind, workload=workload,
            run_token=run_token, started_at=timezone.now(),
        )  # fmt: skip
    acc = Accumulator(list(generation.choices), prompt_tokens)
    # The row is "running" like a worker's, so it beats like one: while the backend is
    # busy with other runs, the stale sweep must not take this request for dead (and if
    # this process does die, the sweep still settles the reservation).
    heartbeat = Checkpointer(
        generation.pk, run_token, acc, settings.WEFT_CHECKPOINT_INTERVAL_SECONDS
    )
    heartbeat.start()
    fields: dict[str, Any] = {}
    state = State.DONE
    try:
        with BackendClient(workload) as client:
            completion = (complete or BackendClient.complete)(client, params)
        acc.request_id = completion.request_id
        acc.set_body(completion.body)
    except Clamped as exc:
        state, fields = State.REFUSED, _error_outcome(State.REFUSED, exc)
    except BackendError as exc:
        state, fields = State.FAILED, _error_outcome(State.FAILED, exc)
    finally:
        heartbeat.stop()
    fields.pop("state", None)
    snapshot = acc.snapshot()
    finish(
        generation,
        state,
        run_token=run_token,
        choices=snapshot["choices"],
        usage=snapshot["usage"] if acc.usage else None,
        request_id=clean_text(fields.pop("request_id", "") or acc.request_id, REQUEST_ID_MAX),
        served_model=acc.model,
        **fields,
    )
    generation.refresh_from_db()
    return generation


def wait_for_state(generation: Generation, states: set[str], timeout: float) -> Generation:
    """Poll until the generation reaches one of `states` (for tests and benches)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        generation.refresh_from_db()
        if generation.state in states:
            return generation
        time.sleep(0.05)
    raise TimeoutError(f"generation {generation.pk} still {generation.state}")
