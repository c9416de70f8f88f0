"""Continuous batching: one model thread, one decode step at a time for everybody.

Each step advances every running sequence (a sample of a prompt of a request) by one
token and, with the room left in the step, evaluates the next chunk of prompts that are
joining, all in one ``Model.evaluate`` call; then every row of the step is sampled at
once (``sample_rows``). A prompt is evaluated once into its first sample's sequence and
copied to its other samples (``Model.copy_seq``). A sequence that finishes, or whose
client went away, is dropped at once and its cache cells are free for the next step.

Capacity: at most ``max_sequences`` sequences run together and the cells they may need
(prompt plus max_tokens per sample) must fit in the model's KV cache; samples beyond that
wait in arrival order.

Priority: a request marked interactive (``X-Weft-Priority: interactive``: Weft's page
runs, where a person watches the text arrive) is admitted ahead of waiting bulk samples,
and while one of its sequences is due, steps carry only interactive rows — bulk rows
keep their cache cells and pause. A step's cost grows with its rows (SmolLM2 on two
threads: ~13 ms for one row, ~67 ms for eight), so a page run beside eight bulk
sequences would otherwise decode five times slower. Work-conserving: the moment no
interactive row is due, bulk rows step again.

Why every step stays under ``step_tokens`` (default 48) tokens: llama.cpp's CPU matrix
multiply switches kernels at 64 rows, and the other kernel's logits differ by up to ~1.5,
so a prompt evaluated in a big batch would be sampled differently from the same prompt
evaluated beside other requests. Below that size a token's logits do not depend on what
else is in the batch (measured: bit-identical), so a fixed seed gives the same text
whether a request runs alone or batched with others.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from engine.generate import (
    ChoiceText,
    Event,
    Failed,
    Finished,
    Prepared,
    PromptScorer,
    TokenEvent,
    completion_logprob,
)
from engine.models import EvalItem, Model
from engine.protocol import ApiError
from engine.sampling import PenaltyState, log_softmax, sample_rows

DEFAULT_STEP_TOKENS = 48
INTERACTIVE = 0  # lower runs first, as vLLM's `priority`
BULK = 1
log = logging.getLogger("engine.scheduler")


class Job:
    """One completion request as the scheduler sees it. Events go to ``queue`` on
    ``loop`` in batches (lists), ending with Finished or Failed."""

    def __init__(
        self,
        prep: Prepared,
        *,
        loop: asyncio.AbstractEventLoop,
        queue: asyncio.Queue[list[Event]],
        delay: float = 0.0,
        priority: int = BULK,
    ) -> None:
        self.prep = prep
        self.loop = loop
        self.queue = queue
        self.delay = delay
        self.priority = priority
        self.cancelled = False
        self.done = False
        self.samples: list[_Sample] = []
        self.groups: list[_Group] = []
        self.unfinished = 0
        self.next_due = 0.0

    def send(self, events: list[Event]) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, events)


@dataclass(eq=False)
class _Group:
    """One prompt of a job, shared by its n samples."""

    job: Job
    index: int
    prompt: list[int]
    scorer: PromptScorer | None
    prefill_seq: int | None = None
    filled: int = 0
    last_logits: np.ndarray | None = None
    holders: set[_Sample] = field(default_factory=set)  # samples whose seq holds the prompt
    scored: bool = False


# A sample holding a sequence that a step would advance (or is about to prefill).
_STEPPING = frozenset({"joining", "first", "running"})


@dataclass(eq=False)
class _Sample:
    group: _Group
    number: int  # sample index within its prompt (seeded seed + number)
    index: int  # choice index: number + prompt_index * n
    rng: np.random.Generator
    penalties: PenaltyState | None
    text: ChoiceText
    state: str = "waiting"  # waiting | joining | first | running | done
    seq: int | None = None
    pos: int = 0
    pending: int = -1


class Scheduler:
    def __init__(
        self,
        model: Model,
        *,
        max_sequences: int = 16,
        step_tokens: int = DEFAULT_STEP_TOKENS,
    ) -> None:
        if max_sequences > step_tokens:
            raise ValueError("max_sequences must not exceed step_tokens")
        self.model = model
        self.max_sequences = max_sequences
        self.step_tokens = step_tokens
        self.kv_size = model.kv_size
        self.kv_used = 0
        self._free = list(range(max_sequences - 1, -1, -1))
        self._cond = threading.Condition()
        self._inbox: list[Job] = []
        self._poked = False
        self._jobs: list[Job] = []
        self._waiting: deque[_Sample] = deque()
        self._prefilling: list[_Group] = []
        self._thread = threading.Thread(target=self._run, name="model", daemon=True)

    # ------------------------------------------------------------------ any thread

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._cond:
            self._inbox.append(job)
            self._poked = True
            self._cond.notify()

    def cancel(self, job: Job) -> None:
        """The client left (or the response ended): free the job's sequences now."""
        if job.done:
            return
        job.cancelled = True
        with self._cond:
            self._poked = True
            self._cond.notify()

    def stats(self) -> dict[str, int]:
        jobs = list(self._jobs)
        running = sum(1 for j in jobs if any(s.seq is not None for s in j.samples))
        return {
            "running": running,
            "waiting": len(jobs) - running + len(self._inbox),
            "sequences": self.max_sequences - len(self._free),
            "max_sequences": self.max_sequences,
            "kv_used": self.kv_used,
            "kv_size": self.kv_size,
        }

    # ------------------------------------------------------------------ model thread

    def _run(self) -> None:
        while True:
            with self._cond:
                inbox, self._inbox = self._inbox, []
                self._poked = False
            for job in inbox:
                self._accept(job)
            try:
                self._drop_cancelled()
                self._admit()
                worked = self._step()
            except Exception as exc:  # keep serving: fail what was running, go on
                log.exception("model step failed")
                self._fail_all(exc)
                worked = True
            if worked:
                continue
            timeout = self._idle_timeout()
            with self._cond:
                if not self._inbox and not self._poked:
                    self._cond.wait(timeout)

    def _accept(self, job: Job) -> None:
        prep = job.prep
        req = prep.request
        sp = req.sampling
        job.next_due = time.monotonic() + job.delay
        for p_idx, prompt in enumerate(prep.prompt_ids):
            scorer = PromptScorer(self.model, prep, p_idx)
            group = _Group(job, p_idx, prompt, scorer if scorer.wanted else None)
            job.groups.append(group)
            for s in range(req.n):
                # vLLM fans n out into child requests seeded seed + index.
                rng = np.random.default_rng(None if req.seed is None else req.seed + s)
                sample = _Sample(
                    group=group,
                    number=s,
                    index=s + p_idx * req.n,
                    rng=rng,
                    penalties=PenaltyState(self.model.vocab_size, prompt)
                    if sp.has_penalties
                    else None,
                    text=ChoiceText(self.model, prep),
                    pos=len(prompt),
                )
                job.samples.append(sample)
        self._enqueue(job.samples)
        job.unfinished = len(job.samples)
        self._jobs.append(job)

    def _enqueue(self, samples: list[_Sample]) -> None:
        """Waiting samples in priority order, arrival order within a priority."""
        priority = samples[0].group.job.priority if samples else BULK
        at = len(self._waiting)
        while at > 0 and self._waiting[at - 1].group.job.priority > priority:
            at -= 1
        for offset, sample in enumerate(samples):
            self._waiting.insert(at + offset, sample)

    def _urgent(self, now: float) -> int:
        """The best priority among jobs with a row due now: only theirs step."""
        due = [
            j.priority
            for j in self._jobs
            if now >= j.next_due and any(s.state in _STEPPING for s in j.samples)
        ]
        return min(due, default=BULK)

    def _drop_cancelled(self) -> None:
        for job in [j for j in self._jobs if j.cancelled]:
            for sample in job.samples:
                if sample.state != "done":
                    self._release(sample)
            for group in job.groups:
                if group in self._prefilling:
                    self._prefilling.remove(group)
                if group.scorer is not None and group.scorer.full is not None:
                    if not group.scored:
                        group.scorer.full.close()
            self._finish_job(job, None)
        if self._waiting and any(s.group.job.cancelled for s in self._waiting):
            self._waiting = deque(s for s in self._waiting if not s.group.job.cancelled)

    def _admit(self) -> None:
        model = self.model
        while self._waiting and self._free:
            sample = self._waiting[0]
            group = sample.group
            need = len(group.prompt) + group.job.prep.max_tokens
            if self.kv_used + need > self.kv_size:
                return  # in order: later requests wait behind this one
            self._waiting.popleft()
            sample.seq = self._free.pop()
            self.kv_used += need
            if group.prefill_seq is not None:
                sample.state = "joining"
            elif group.holders:
                holder = next(iter(group.holders))
                assert holder.seq is not None
                model.copy_seq(holder.seq, sample.seq, len(group.prompt))
                group.holders.add(sample)
                sample.state = "first"
            else:
                group.prefill_seq = sample.seq
                group.filled = 0
                group.holders.add(sample)
                sample.state = "joining"
                self._prefilling.append(group)

    def _step(self) -> bool:
        now = time.monotonic()
        decode: list[_Sample] = []
        first: list[_Sample] = []
        urgent = self._urgent(now)
        for job in self._jobs:
            if now < job.next_due or job.priority > urgent:
                continue
            for sample in job.samples:
                if sample.state == "running":
                    decode.append(sample)
                elif sample.state == "first":
                    first.append(sample)
        items = [EvalItem(s.seq, [s.pending], s.pos) for s in decode]  # type: ignore[arg-type]
        budget = self.step_tokens - len(items)
        prefill: list[tuple[_Group, EvalItem]] = []
        for group in self._prefilling:
            if budget <= 0:
                break
            if group.job.priority > urgent:
                continue
            take = min(budget, len(group.prompt) - group.filled)
            scoring = group.scorer is not None and not group.scored
            end = group.filled + take
            item = EvalItem(
                group.prefill_seq,  # type: ignore[arg-type]
                group.prompt[group.filled : end],
                group.filled,
                all_logits=scoring,
                last_logits=end == len(group.prompt),
            )
            prefill.append((group, item))
            budget -= take
        if not items and not prefill and not first:
            return False
        batch = items + [item for _, item in prefill]
        if batch:
            logits = self.model.evaluate(batch)
        else:  # only first tokens to draw, from logits already kept
            logits = np.empty((0, self.model.vocab_size), dtype=np.float32)
        for sample in decode:
            sample.pos += 1
        offset = len(decode)
        outbox: dict[Job, list[Event]] = {}
        for group, item in prefill:
            out = logits[offset : offset + item.n_outputs]
            offset += item.n_outputs
            if item.all_logits and group.scorer is not None:
                group.scorer.add(out, item.pos)
            group.filled += len(item.tokens)
            if group.filled == len(group.prompt):
                ready = self._prefilled(group, out[-1], outbox)
                if now >= group.job.next_due:
                    first.extend(ready)
        if first:
            rows = np.concatenate([logits[: len(decode)], [s.group.last_logits for s in first]])
        else:
            rows = logits[: len(decode)]  # the model's own buffer, no copy
        self._sample(decode + first, rows, now, outbox)
        for job, events in outbox.items():
            job.send(events)
        return True

    def _prefilled(
        self, group: _Group, last: np.ndarray, outbox: dict[Job, list[Event]]
    ) -> list[_Sample]:
        """The prompt is in the cache: share it with the samples waiting for it."""
        self._prefilling.remove(group)
        src = group.prefill_seq
        assert src is not None
        group.prefill_seq = None
        group.last_logits = np.array(last, dtype=np.float32)
        if group.scorer is not None and not group.scored:
            group.scored = True
            outbox.setdefault(group.job, []).append(group.scorer.event())
        ready = []
        for sample in group.job.samples:
            if sample.group is group and sample.state == "joining":
                if sample.seq != src:
                    self.model.copy_seq(src, sample.seq, len(group.prompt))  # type: ignore[arg-type]
                    group.holders.add(sample)
                sample.state = "first"
                ready.append(sample)
        return ready

    def _sample(
        self,
        samples: list[_Sample],
        matrix: np.ndarray,
        now: float,
        outbox: dict[Job, list[Event]],
    ) -> None:
        if not samples:
            return
        sps = [s.group.job.prep.request.sampling for s in samples]
        us = [0.0 if sp.greedy else s.rng.random() for s, sp in zip(samples, sps, strict=True)]
        tokens = sample_rows(matrix, sps, us, [s.penalties for s in samples]).tolist()
        wants = [i for i, s in enumerate(samples) if s.group.job.prep.request.logprobs is not None]
        lps = log_softmax(matrix[wants]) if wants else None
        lp_row = {i: j for j, i in enumerate(wants)}
        for i, (sample, token) in enumerate(zip(samples, tokens, strict=True)):
            job = sample.group.job
            req = job.prep.request
            if sample.penalties is not None:
                sample.penalties.add(token)
            entry = None
            if lps is not None and i in lp_row:
                assert req.logprobs is not None
                entry = completion_logprob(self.model, lps[lp_row[i]], token, req.logprobs)
            first = sample.text.count == 0
            delta, finish, stop_reason = sample.text.add(token)
            outbox.setdefault(job, []).append(
                TokenEvent(
                    index=sample.index,
                    prompt_index=sample.group.index,
                    text=delta,
                    logprob=entry,
                    completion_tokens=sample.text.count,
                    finish_reason=finish,
                    stop_reason=stop_reason,
                    first=first,
                )
            )
            job.next_due = now + job.delay
            if finish:
                self._release(sample)
                job.unfinished -= 1
                if job.unfinished == 0:
                    self._finish_job(job, outbox)
            else:
                sample.pending = token
                sample.state = "running"

    def _release(self, sample: _Sample) -> None:
        """A sample leaves: drop its sequence and give its cells back."""
        group = sample.group
        if sample.seq is not None:
            self.model.drop_seq(sample.seq)
            self._free.append(sample.seq)
            self.kv_used -= len(group.prompt) + group.job.prep.max_tokens
            sample.seq = None
        sample.state = "done"
        group.holders.discard(sample)

    def _finish_job(self, job: Job, outbox: dict[Job, list[Event]] | None) -> None:
        job.done = True
        if job in self._jobs:
            self._jobs.remove(job)
        if outbox is not None:
            outbox.setdefault(job, []).append(Finished())

    def _fail_all(self, exc: Exception) -> None:
        error = ApiError(f"the model failed: {exc}", status=500, code="internal_error")
        for job in list(self._jobs):
            for sample in job.samples:
                if sample.state != "done":
                    self._release(sample)
            self._finish_job(job, None)
            job.send([Failed(error)])
        self._waiting.clear()
        self._prefilling.clear()

    def _idle_timeout(self) -> float | None:
        """Seconds until a delayed job is due again (None: nothing to wait for)."""
        dues = [j.next_due for j in self._jobs if any(s.seq is not None for s in j.samples)]
        if not dues:
            return None
        return max(0.0, min(dues) - time.monotonic())
