"""The worker side of completion jobs (api.jobs): the door's executor for kind "job".
It runs a claimed job through the door's raw path (completions.passthrough), so the
result is the backend's body byte for byte, written in ResultChunk pieces as it
arrives (never held whole), and ends the run with lifecycle.finish under its token.

Nothing here logs prompt or completion text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.conf import settings
from django.db import connections

from api import quotas
from api.errors import ApiError
from api.jobs import FINAL_SAVE_PATIENCE, JOB, State
from api.upstream import upstream_error, usage_from_tail
from completions import budget, lifecycle, passthrough, registry
from completions.errors import BackendError
from completions.models import Generation, ResultChunk
from completions.pipeline import Accumulator, Checkpointer, with_db_retry
from completions.schema import CompletionParams

log = logging.getLogger(__name__)


# --- the worker ----------------------------------------------------------------------------


@dataclass
class Outcome:
    state: str
    usage: dict[str, Any] | None = None
    error: ApiError | None = None
    served_model: str = ""
    result_bytes: int = 0
    fields: dict[str, Any] = field(default_factory=dict)


def execute(job: Generation, run_token: str) -> None:
    """Run one claimed job (the door's executor for kind "job")."""
    beat = Checkpointer(
        job.pk, run_token, Accumulator([], job.prompt_tokens),
        max(settings.WEFT_CHECKPOINT_INTERVAL_SECONDS, settings.WEFT_GENERATION_STALE_SECONDS / 5),
    )  # fmt: skip
    beat.start()
    writer = _Writer(job.pk, run_token, job.owner_id)
    try:
        outcome = asyncio.run(_run(job, writer, beat.cancelled, beat.lost))
    except Exception as exc:  # a bug must still end the job, not leave it "running"
        log.error("job %s failed unexpectedly: %s", job.public_id, type(exc).__name__)
        outcome = Outcome(State.FAILED, error=ApiError("internal_error", "internal error"))
    finally:
        beat.stop()
        writer.close()
    if beat.lost.is_set():
        return  # the claim was lost (the stale sweep queued it again): the new run settles
    fields = {
        "usage": outcome.usage,
        "served_model": outcome.served_model[:300],
        "result_token": run_token if outcome.state == State.DONE else "",
        "result_bytes": outcome.result_bytes,
        **outcome.fields,
    }
    if outcome.error is not None:
        fields["error_code"] = outcome.error.code
        fields["error_message"] = outcome.error.message
        fields["error_detail"] = {
            "code": outcome.error.code,
            "message": outcome.error.message,
            "param": outcome.error.param,
        }
    with_db_retry(
        lambda: lifecycle.finish(job, outcome.state, run_token=run_token, **fields),
        f"job {job.public_id}: final save",
        FINAL_SAVE_PATIENCE,
    )


registry.register_executor(JOB, execute)


class _Writer:
    """Stores the body as it arrives, in ResultChunk pieces, on one thread of its own
    (the ORM is synchronous; its connection is closed with it)."""

    def __init__(self, generation_id: int, run_token: str, owner_id: int) -> None:
        self.generation_id = generation_id
        self.run_token = run_token
        self.owner_id = owner_id
        self.seq = 0
        self.pool = ThreadPoolExecutor(1, thread_name_prefix=f"job-{generation_id}-body")

    async def write(self, data: bytes) -> None:
        seq = self.seq
        self.seq += 1
        await asyncio.get_running_loop().run_in_executor(self.pool, self._insert, seq, data)

    def _insert(self, seq: int, data: bytes) -> None:
        with_db_retry(
            lambda: ResultChunk.objects.create(
                generation_id=self.generation_id, run_token=self.run_token, seq=seq, data=data
            ),
            f"job {self.generation_id}: result chunk",
            FINAL_SAVE_PATIENCE,
        )
        if quotas.over_quota(self.owner_id):  # with the person's other results
            raise quotas.StoredBytesExceeded

    async def drop(self) -> None:
        """Delete what this attempt stored (a job stopped by the quota)."""
        rows = ResultChunk.objects.filter(
            generation_id=self.generation_id, run_token=self.run_token
        )
        await asyncio.get_running_loop().run_in_executor(self.pool, rows.delete)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.pool.submit(connections.close_all).result(timeout=10)
        self.pool.shutdown(wait=False)


async def _run(
    job: Generation, writer: _Writer, cancelled: threading.Event, lost: threading.Event
) -> Outcome:
    started = time.monotonic()
    work = asyncio.ensure_future(_call(job, writer))

    async def watch() -> None:
        while not (cancelled.is_set() or lost.is_set()):
            await asyncio.sleep(0.1)

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            return work.result()
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        # As for a synchronous client that hung up.
        usage = budget.run_usage(job, end=budget.End.HUNG_UP, elapsed=time.monotonic() - started)
        return Outcome(State.CANCELLED, usage=usage)
    finally:
        watcher.cancel()
        await passthrough.close_client()


HEAD_BYTES = 4096
TAIL_BYTES = 4096


async def _call(job: Generation, writer: _Writer) -> Outcome:
    try:
        to = await passthrough.target((job.target or {}).get("model"))
    except BackendError as exc:  # nothing was sent
        return Outcome(
            State.FAILED, error=upstream_error(exc), usage=budget.run_usage(job, prompt_tokens=0)
        )
    served = to.model.root or to.model.id
    try:
        async with asyncio.timeout(settings.WEFT_API_REQUEST_WINDOW_SECONDS):
            response = await passthrough.open_completion(to, job.params, workload=job.workload)
        try:
            head, tail, size = await _store(response.aiter_raw(), writer)
        finally:
            await response.aclose()
    except TimeoutError:
        error = ApiError(
            "upstream_deadline", "the backend did not answer inside the request window"
        )
        return await _failed(job, to, error, served)
    except BackendError as exc:
        return await _failed(job, to, upstream_error(exc), served)
    except httpx.HTTPError as exc:
        return await _failed(job, to, upstream_error(passthrough.transport_error(exc)), served)
    except quotas.StoredBytesExceeded:
        return await _stopped(job, writer, served)
    if not _is_completion(head):
        error = ApiError("upstream_error", "the backend answered with something not a completion")
        return await _failed(job, to, error, served)
    usage = budget.run_usage(job, usage=usage_from_tail(tail), end=budget.End.ANSWERED)
    return Outcome(State.DONE, usage=usage, served_model=served, result_bytes=size)


async def _stopped(job: Generation, writer: _Writer, served: str) -> Outcome:
    """Its result passed the person's stored-bytes quota: what it stored goes; the
    backend ran and its usage was never read, so it is charged as an answer without."""
    await writer.drop()
    usage = budget.run_usage(job, end=budget.End.ANSWERED)
    return Outcome(State.FAILED, error=quotas.stopped_error(), usage=usage, served_model=served)


async def _store(chunks: AsyncIterator[bytes], writer: _Writer) -> tuple[bytes, bytes, int]:
    """Write the body as it comes, a ResultChunk at a time; returns its first and last
    bytes (for the checks and the usage) and its size. Memory: one chunk."""
    piece = bytearray()
    head = b""
    tail = b""
    size = 0
    async for data in chunks:
        if len(head) < HEAD_BYTES:
            head = (head + data)[:HEAD_BYTES]
        tail = (tail + data)[-TAIL_BYTES:]
        size += len(data)
        piece += data
        while len(piece) >= ResultChunk.CHUNK_BYTES:
            await writer.write(bytes(piece[: ResultChunk.CHUNK_BYTES]))
            del piece[: ResultChunk.CHUNK_BYTES]
    if piece:
        await writer.write(bytes(piece))
    return head, tail, size


def _is_completion(head: bytes) -> bool:
    """A JSON object that is not an error (the body is passed on unread, as the proxy
    passes a synchronous answer: it is checked only at its start)."""
    text = head.lstrip()
    return text.startswith(b"{") and not text[1:].lstrip().startswith(b'"error"')


async def _failed(job: Generation, to: passthrough.Target, error: ApiError, served: str) -> Outcome:
    """As a synchronous request that failed: the prompt is charged, counted exactly
    when the stored count was only a bound."""
    prompt = job.prompt_tokens
    if not job.prompt_exact:
        counted = await passthrough.count_tokens(to, _prompts(job))
        prompt = sum(counted) if counted is not None else prompt
    usage = budget.run_usage(job, prompt_tokens=prompt)
    return Outcome(State.FAILED, error=error, usage=usage, served_model=served)


def _prompts(job: Generation) -> list[str | list[int]]:
    try:
        return CompletionParams.model_validate(job.params).prompts
    except ValueError:
        return []
