"""Completion responses: a request's events from the scheduler, written as vLLM's JSON
body or as SSE.

Responses are hand-written ASGI callables so they can watch for the client leaving: a
disconnect cancels the job, and the scheduler drops its sequences before its next step.
A stream's headers go out before the request has a sequence (as vLLM does), so a client
waiting behind a full batch sees a live response instead of a read timeout. A body with
full-vocabulary prompt logprobs is encoded position by position on the encoder thread and
sent chunked: it is never whole in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

from starlette.types import Receive, Scope, Send

from engine.encode import dumps, fragment, full_vocab_encoder
from engine.faults import Fault
from engine.generate import (
    Failed,
    Finished,
    FullVocabRows,
    LogprobEntry,
    Prepared,
    PromptEvent,
)
from engine.http import StreamCut, error_response
from engine.scheduler import BULK, Job

if TYPE_CHECKING:
    from engine.app import Engine

# Full-vocabulary positions encoded per hop to an encoder thread (~4 MB each), and the
# spans encoded or being sent at once (the engine has two encoder threads).
POSITIONS_PER_CHUNK = 2
SPANS_IN_FLIGHT = 3


async def _sleep_unless(gone: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(gone.wait(), seconds)


def logprobs_block(entries: list[LogprobEntry], offset: int) -> tuple[dict[str, list[Any]], int]:
    block: dict[str, list[Any]] = {
        "text_offset": [],
        "tokens": [],
        "token_logprobs": [],
        "top_logprobs": [],
    }
    for piece, lp, top in entries:
        block["text_offset"].append(offset)
        block["tokens"].append(piece)
        block["token_logprobs"].append(lp)
        block["top_logprobs"].append(top)
        offset += len(piece)
    return block, offset


class CompletionResponse:
    """Submits a prepared request to the scheduler and answers it, as JSON or SSE."""

    def __init__(
        self, engine: Engine, prep: Prepared, fault: Fault | None, rid: str, priority: int = BULK
    ) -> None:
        self.engine = engine
        self.priority = priority
        self.prep = prep
        self.fault = fault or Fault()
        self.rid = rid
        self.id = "cmpl-" + uuid.uuid4().hex[:16]
        self.created = int(time.time())
        self.headers: list[tuple[bytes, bytes]] = []
        if self.fault.clamp_applied is not None:
            requested = prep.max_tokens
            prep.max_tokens = min(prep.max_tokens, self.fault.clamp_applied)
            source = "default" if prep.max_tokens_defaulted else "client"
            value = f"requested={requested},applied={prep.max_tokens},reason=budget,source={source}"
            self.headers.append((b"x-acs-max-tokens-clamped", value.encode()))
        self.delay = max(self.fault.token_delay, engine.token_delay)
        self.gone = asyncio.Event()
        self.queue: asyncio.Queue[list[Any]] = asyncio.Queue()
        self.job: Job | None = None
        self.full_rows: list[FullVocabRows] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.create_task(self._watch_disconnect(receive))
        try:
            if self.fault.first_byte_delay:
                await _sleep_unless(self.gone, self.fault.first_byte_delay)
            if self.gone.is_set():
                return
            if self.prep.request.stream:
                await self._stream(send)
            else:
                await self._json(send)
        finally:
            watcher.cancel()
            if self.job is not None:
                self.engine.scheduler.cancel(self.job)
            for rows in self.full_rows:
                rows.close()

    async def _watch_disconnect(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.gone.set()
                self.queue.put_nowait([None])
                if self.job is not None:
                    self.engine.scheduler.cancel(self.job)
                return

    async def _events(self) -> Any:
        """Events of this request until Finished; Failed is yielded and ends it; a departed
        client ends it silently."""
        loop = asyncio.get_running_loop()
        self.job = Job(
            self.prep, loop=loop, queue=self.queue, delay=self.delay, priority=self.priority
        )
        self.engine.scheduler.submit(self.job)
        while True:
            for event in await self.queue.get():
                if event is None or self.gone.is_set():
                    return
                if isinstance(event, Finished):
                    return
                if isinstance(event, PromptEvent) and isinstance(
                    event.prompt_logprobs, FullVocabRows
                ):
                    self.full_rows.append(event.prompt_logprobs)
                yield event
                if isinstance(event, Failed):
                    return

    def _usage(self, completion_tokens: int, prompt_tokens: int | None = None) -> dict[str, int]:
        if prompt_tokens is None:
            prompt_tokens = sum(len(p) for p in self.prep.prompt_ids)
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    async def _cut(self, send: Send) -> None:
        if self.fault.cut_mode == "eof":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        raise StreamCut("scripted fault: cut_after")

    # ------------------------------------------------------------------ JSON

    async def _json(self, send: Send) -> None:
        req = self.prep.request
        n_choices = len(self.prep.prompt_ids) * req.n
        texts: list[list[str]] = [[] for _ in range(n_choices)]
        entries: list[list[LogprobEntry]] = [[] for _ in range(n_choices)]
        finish: list[tuple[str | None, str | None]] = [(None, None)] * n_choices
        counts = [0] * n_choices
        prompt_events: dict[int, PromptEvent] = {}
        async for event in self._events():
            if isinstance(event, Failed):
                response = error_response(event.error, self.rid)
                await response({"type": "http"}, _no_receive, send)
                return
            if isinstance(event, PromptEvent):
                prompt_events[event.prompt_index] = event
                continue
            texts[event.index].append(event.text)
            if event.logprob is not None:
                entries[event.index].append(event.logprob)
            counts[event.index] = event.completion_tokens
            if event.finish_reason:
                finish[event.index] = (event.finish_reason, event.stop_reason)
        if self.gone.is_set():
            return
        choices = []
        full: dict[int, FullVocabRows] = {}
        for index in range(n_choices):
            p_idx = index // req.n
            pe = prompt_events.get(p_idx)
            text = "".join(texts[index])
            logprobs = None
            if req.echo:
                text = self.prep.prompt_texts[p_idx] + text
            if req.logprobs is not None:
                echoed = (pe.echo_logprobs or []) if (req.echo and pe) else []
                logprobs, _ = logprobs_block(echoed + entries[index], 0)
            plp: Any = None
            prompt_lp = pe.prompt_logprobs if pe is not None else None
            if isinstance(prompt_lp, FullVocabRows):
                full[index] = prompt_lp
            elif prompt_lp is not None:
                plp = fragment(prompt_lp)
            choices.append(
                {
                    "index": index,
                    "text": text,
                    "logprobs": logprobs,
                    "finish_reason": finish[index][0],
                    "stop_reason": finish[index][1],
                    "prompt_logprobs": plp,
                }
            )
        body = {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.engine.model.root,
            "choices": choices,
            "usage": self._usage(sum(counts)),
        }
        if full:
            await self._json_streamed(send, body, full)
            return
        if self.fault.no_usage:
            del body["usage"]
        data = dumps(body)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
            *self.headers,
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if self.fault.cut_after is not None:
            await send(
                {"type": "http.response.body", "body": data[: len(data) // 2], "more_body": True}
            )
            await self._cut(send)
            return
        await send({"type": "http.response.body", "body": data})

    async def _json_streamed(
        self, send: Send, body: dict[str, Any], full: dict[int, FullVocabRows]
    ) -> None:
        """The same body, sent chunked, with each full-vocabulary prompt_logprobs encoded
        position by position off the event loop."""
        headers = [(b"content-type", b"application/json"), *self.headers]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def part(data: bytes) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": True})

        choices = body.pop("choices")
        usage = body.pop("usage")
        head = dumps(body)
        await part(head[:-1] + b',"choices":[')
        encoder = await self.engine.encode(full_vocab_encoder, self.engine.model)
        cut = self.fault.cut_after is not None
        for i, choice in enumerate(choices):
            rows = full.get(choice["index"])
            if rows is None:
                await part((b"," if i else b"") + dumps(choice))
                continue
            del choice["prompt_logprobs"]
            opening = dumps(choice)[:-1] + b',"prompt_logprobs":[null'
            await part((b"," if i else b"") + opening)
            if cut:
                await self._cut(send)
                return
            positions = len(rows.prompt) - 1
            spans = [
                (start, min(positions, start + POSITIONS_PER_CHUNK))
                for start in range(0, positions, POSITIONS_PER_CHUNK)
            ]
            # Spans are encoded on the encoder threads (numpy work, mostly without the
            # GIL) while earlier ones are sent, in order: the threads stay busy during
            # a send, and at most SPANS_IN_FLIGHT spans are in memory.
            ahead: deque[asyncio.Future[bytes]] = deque()
            for start, stop in spans:
                ahead.append(
                    asyncio.ensure_future(
                        self.engine.encode(_encode_positions, encoder, rows, start, stop)
                    )
                )
                if len(ahead) >= SPANS_IN_FLIGHT:
                    await part(await ahead.popleft())
                if self.gone.is_set():
                    for pending in ahead:
                        pending.cancel()
                    return
            while ahead:
                await part(await ahead.popleft())
            await part(b"]}")
        await send({"type": "http.response.body", "body": b'],"usage":' + dumps(usage) + b"}"})

    # ------------------------------------------------------------------ SSE

    async def _stream(self, send: Send) -> None:
        req = self.prep.request
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            *self.headers,
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def emit(obj: Any) -> None:
            data = b"data: " + dumps(obj) + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": True})

        cut = self.fault.cut_after
        if cut == 0:
            await self._cut(send)
            return
        prompt_events: dict[int, PromptEvent] = {}
        offsets: dict[int, int] = {}
        sent_tokens = 0
        total_completion = 0
        async for event in self._events():
            if isinstance(event, Failed):
                await emit(event.error.body(self.rid))
                break
            if isinstance(event, PromptEvent):
                prompt_events[event.prompt_index] = event
                continue
            p_idx = event.prompt_index
            text = event.text
            entries = [event.logprob] if event.logprob is not None else []
            if event.first and req.echo:
                text = self.prep.prompt_texts[p_idx] + text
                pe = prompt_events.get(p_idx)
                if pe and pe.echo_logprobs:
                    entries = pe.echo_logprobs + entries
            logprobs = None
            if req.logprobs is not None:
                logprobs, offsets[event.index] = logprobs_block(
                    entries, offsets.get(event.index, 0)
                )
            usage = None
            if req.continuous_usage_stats:
                usage = self._usage(event.completion_tokens, len(self.prep.prompt_ids[p_idx]))
            await emit(
                {
                    "id": self.id,
                    "object": "text_completion",
                    "created": self.created,
                    "model": self.engine.model.root,
                    "choices": [
                        {
                            "index": event.index,
                            "text": text,
                            "logprobs": logprobs,
                            "finish_reason": event.finish_reason,
                            "stop_reason": event.stop_reason,
                        }
                    ],
                    "usage": usage,
                }
            )
            if event.finish_reason:
                total_completion += event.completion_tokens
            sent_tokens += 1
            if cut is not None and sent_tokens >= cut:
                await self._cut(send)
                return
        if self.gone.is_set():
            return
        if req.include_usage:
            await emit(
                {
                    "id": self.id,
                    "object": "text_completion",
                    "created": self.created,
                    "model": self.engine.model.root,
                    "choices": [],
                    "usage": self._usage(total_completion),
                }
            )
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


def _encode_positions(encoder: Any, rows: FullVocabRows, start: int, stop: int) -> bytes:
    """Positions ``start..stop-1`` (predicting prompt[start+1..stop]), each preceded by
    the comma that follows the previous entry (the list opens with null)."""
    return encoder.positions([(rows.row(i), rows.prompt[i + 1]) for i in range(start, stop)])


async def _no_receive() -> Any:
    return {"type": "http.disconnect"}
