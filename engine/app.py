"""The HTTP surface: vLLM's OpenAI-compatible API on Starlette.

All model work runs on one worker thread, and a request holds ``Engine.lock`` from its
first token to its last, so requests take turns on the single model context. Completion
responses are hand-written ASGI callables so they can watch for the client leaving: a
disconnect stops generation at the next token and frees the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.faults import Fault, parse_fault
from engine.generate import (
    FULL_VOCAB_MAX_PROMPT_TOKENS,
    Prepared,
    PromptEvent,
    TokenEvent,
    generate,
    prepare,
)
from engine.models import Model
from engine.protocol import ApiError, parse_completion

T = TypeVar("T")
RECENT_REQUESTS = 200


class StreamCut(Exception):
    """Raised inside a started response so the server drops the connection."""


class _HideStreamCut(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while exc is not None:
            if isinstance(exc, StreamCut):
                return False
            exc = exc.__cause__ or exc.__context__
        return True


logging.getLogger("uvicorn.error").addFilter(_HideStreamCut())


@dataclass
class Engine:
    model: Model
    backend: str = "llama"
    max_logprobs: int = 20
    token_delay: float = 0.0
    server_fault: Fault | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="model")
    )
    fault_queue: deque[tuple[dict[str, Any], Fault]] = field(default_factory=deque)
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_REQUESTS))
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def scripted(self) -> bool:
        return self.backend == "scripted"

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run model work on the model thread."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    @contextlib.asynccontextmanager
    async def turn(self, gone: asyncio.Event) -> AsyncIterator[bool]:
        """Wait for the model; yields False if the client left while queued."""
        acquire = asyncio.ensure_future(self.lock.acquire())
        leave = asyncio.ensure_future(gone.wait())
        await asyncio.wait({acquire, leave}, return_when=asyncio.FIRST_COMPLETED)
        leave.cancel()
        if not acquire.done() or gone.is_set():
            acquire.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                if await acquire:
                    self.lock.release()
            yield False
            return
        try:
            yield True
        finally:
            self.lock.release()

    def model_card(self) -> dict[str, Any]:
        m = self.model
        return {
            "id": m.model_id,
            "object": "model",
            "created": self.created,
            "owned_by": "weft",
            "root": m.root,
            "parent": None,
            "max_model_len": m.max_model_len,
            "default": True,
            "capabilities": {
                "max_logprobs": self.max_logprobs,
                "full_vocab_max_prompt_tokens": FULL_VOCAB_MAX_PROMPT_TOKENS,
            },
        }

    async def record(self, request: Request) -> None:
        """Remember what was received, for tests of the scripted backend."""
        if not self.scripted:
            return
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.recent.append(
            {
                "time": time.time(),
                "method": request.method,
                "path": request.url.path,
                "headers": dict(request.headers),
                "body": body,
                "raw": raw.decode("utf-8", errors="replace"),
            }
        )

    def take_fault(self, request: Request) -> Fault | None:
        """Header fault, else the next queued one, else the server-wide one."""
        if not self.scripted:
            return None
        header = request.headers.get("x-scripted-fault")
        if header:
            return parse_fault(header)
        if self.fault_queue:
            return self.fault_queue.popleft()[1]
        return self.server_fault


# --------------------------------------------------------------------------- helpers


class Raw:
    """Pre-serialised JSON text to splice into a response."""

    def __init__(self, text: str) -> None:
        self.text = text


def dumps(obj: Any) -> str:
    if isinstance(obj, Raw):
        return obj.text
    if isinstance(obj, dict):
        return "{" + ",".join(json.dumps(k) + ":" + dumps(v) for k, v in obj.items()) + "}"
    if isinstance(obj, list):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    return json.dumps(obj)


def request_id(request: Request) -> str:
    return request.scope.get("state", {}).get("request_id", "")


def error_response(err: ApiError, rid: str) -> JSONResponse:
    return JSONResponse(err.body(rid), status_code=err.status, headers=err.headers)


async def read_json(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ApiError(f"Request body is not valid JSON: {exc}") from exc


def _api_errors(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as err:
            return error_response(err, request_id(request))

    return wrapped


class RequestIdMiddleware:
    """Every response carries X-Request-Id (error bodies repeat it as request_id)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = "req-" + uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"x-request-id", rid.encode())]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


# --------------------------------------------------------------------------- completions


async def _watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


async def _sleep_unless(gone: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(gone.wait(), seconds)


def _take(gen: Any, tokens_wanted: int) -> tuple[list[PromptEvent | TokenEvent], bool]:
    """Pull events until ``tokens_wanted`` tokens came out; True when exhausted."""
    events: list[PromptEvent | TokenEvent] = []
    got = 0
    for event in gen:
        events.append(event)
        if isinstance(event, TokenEvent):
            got += 1
            if got >= tokens_wanted:
                return events, False
    return events, True


class CompletionResponse:
    """Runs a prepared request on the model and answers it, as JSON or SSE."""

    def __init__(self, engine: Engine, prep: Prepared, fault: Fault | None, rid: str) -> None:
        self.engine = engine
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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()
        watcher = asyncio.create_task(_watch_disconnect(receive, gone))
        try:
            if self.fault.first_byte_delay:
                await _sleep_unless(gone, self.fault.first_byte_delay)
            if gone.is_set():
                return
            async with self.engine.turn(gone) as ours:
                if not ours:
                    return
                gen = generate(self.engine.model, self.prep)
                try:
                    if self.prep.request.stream:
                        await self._stream(gen, send, gone)
                    else:
                        await self._json(gen, send, gone)
                finally:
                    # Closing runs on the model thread, after any step still in flight.
                    self.engine.executor.submit(gen.close)
        finally:
            watcher.cancel()

    async def _events(
        self, gen: Any, gone: asyncio.Event
    ) -> AsyncIterator[PromptEvent | TokenEvent]:
        # Streams and delayed tokens go one token per hop; otherwise batches amortise the
        # thread hand-off while still checking for a departed client between batches.
        per_hop = 1 if (self.prep.request.stream or self.delay) else 16
        done = False
        while not done and not gone.is_set():
            events, done = await self.engine.run(_take, gen, per_hop)
            for event in events:
                if self.delay and isinstance(event, TokenEvent):
                    await _sleep_unless(gone, self.delay)
                yield event

    def _logprobs_block(self, entries: list[Any], offset: int) -> tuple[dict[str, list[Any]], int]:
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

    def _usage(self, completion_tokens: int, prompt_tokens: int | None = None) -> dict[str, int]:
        if prompt_tokens is None:
            prompt_tokens = sum(len(p) for p in self.prep.prompt_ids)
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    async def _json(self, gen: Any, send: Send, gone: asyncio.Event) -> None:
        req = self.prep.request
        n_choices = len(self.prep.prompt_ids) * req.n
        texts: list[list[str]] = [[] for _ in range(n_choices)]
        entries: list[list[Any]] = [[] for _ in range(n_choices)]
        finish: list[tuple[str | None, str | None]] = [(None, None)] * n_choices
        counts = [0] * n_choices
        prompt_events: dict[int, PromptEvent] = {}
        async for event in self._events(gen, gone):
            if isinstance(event, PromptEvent):
                prompt_events[event.prompt_index] = event
                continue
            texts[event.index].append(event.text)
            if event.logprob is not None:
                entries[event.index].append(event.logprob)
            counts[event.index] = event.completion_tokens
            if event.finish_reason:
                finish[event.index] = (event.finish_reason, event.stop_reason)
        if gone.is_set():
            return
        choices = []
        for index in range(n_choices):
            p_idx = index // req.n
            pe = prompt_events.get(p_idx)
            text = "".join(texts[index])
            logprobs = None
            if req.echo:
                text = self.prep.prompt_texts[p_idx] + text
            if req.logprobs is not None:
                all_entries = ((pe.echo_logprobs or []) if (req.echo and pe) else []) + entries[
                    index
                ]
                logprobs, _ = self._logprobs_block(all_entries, 0)
            choices.append(
                {
                    "index": index,
                    "text": text,
                    "logprobs": logprobs,
                    "finish_reason": finish[index][0],
                    "stop_reason": finish[index][1],
                    "prompt_logprobs": Raw(pe.prompt_logprobs_json)
                    if pe and pe.prompt_logprobs_json is not None
                    else None,
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
        data = dumps(body).encode()
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

    async def _cut(self, send: Send) -> None:
        if self.fault.cut_mode == "eof":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        raise StreamCut("scripted fault: cut_after")

    async def _stream(self, gen: Any, send: Send, gone: asyncio.Event) -> None:
        req = self.prep.request
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            *self.headers,
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def emit(obj: Any) -> None:
            data = b"data: " + dumps(obj).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": True})

        cut = self.fault.cut_after
        if cut == 0:
            await self._cut(send)
            return
        prompt_events: dict[int, PromptEvent] = {}
        offsets: dict[int, int] = {}
        sent_tokens = 0
        total_completion = 0
        async for event in self._events(gen, gone):
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
                logprobs, offsets[event.index] = self._logprobs_block(
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
        if gone.is_set():
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


# --------------------------------------------------------------------------- routes


def build_app(engine: Engine) -> ASGIApp:
    model = engine.model

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "backend": engine.backend, "model": model.model_id})

    async def models(request: Request) -> Response:
        await engine.record(request)
        return JSONResponse({"object": "list", "data": [engine.model_card()]})

    @_api_errors
    async def completions(request: Request) -> Response:
        await engine.record(request)
        fault = engine.take_fault(request)
        if fault is not None and fault.status is not None:
            if fault.first_byte_delay:
                await asyncio.sleep(fault.first_byte_delay)
            raise fault.error()
        req = parse_completion(
            await read_json(request),
            default_model=model.model_id,
            known_models={model.model_id},
            max_logprobs=engine.max_logprobs,
        )
        prep = await engine.run(prepare, model, req)
        return CompletionResponse(engine, prep, fault, request_id(request))  # type: ignore[return-value]

    async def chat(request: Request) -> Response:
        await engine.record(request)
        err = ApiError(
            "These are base models: use POST /v1/completions (no chat template).",
            code="chat_completions_unsupported",
        )
        return error_response(err, request_id(request))

    def _model_field(body: dict[str, Any]) -> None:
        name = body.get("model")
        if name is not None and name != model.model_id:
            raise ApiError(
                f"The model '{name}' does not exist", code="model_not_found", param="model"
            )

    @_api_errors
    async def tokenize(request: Request) -> Response:
        await engine.record(request)
        body = await read_json(request)
        if not isinstance(body, dict):
            raise ApiError("Request body must be a JSON object")
        for key in body:
            if key not in ("model", "prompt", "add_special_tokens", "return_token_strs"):
                raise ApiError(f"Unknown field '{key}'", param=key)
        _model_field(body)
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ApiError("'prompt' must be a string", param="prompt")
        special = body.get("add_special_tokens", True)
        strs = body.get("return_token_strs", False)
        for name, value in (("add_special_tokens", special), ("return_token_strs", strs)):
            if type(value) is not bool:
                raise ApiError(f"'{name}' must be a boolean", param=name)
        tokens = await engine.run(model.tokenize, prompt, special)
        return JSONResponse(
            {
                "count": len(tokens),
                "max_model_len": model.max_model_len,
                "tokens": tokens,
                "token_strs": [model.pieces[t] for t in tokens] if strs else None,
            }
        )

    @_api_errors
    async def detokenize(request: Request) -> Response:
        await engine.record(request)
        body = await read_json(request)
        if not isinstance(body, dict):
            raise ApiError("Request body must be a JSON object")
        for key in body:
            if key not in ("model", "tokens"):
                raise ApiError(f"Unknown field '{key}'", param=key)
        _model_field(body)
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(
            type(t) is int and 0 <= t < model.vocab_size for t in tokens
        ):
            raise ApiError("'tokens' must be a list of token ids", param="tokens")
        return JSONResponse({"prompt": await engine.run(model.decode, tokens)})

    @_api_errors
    async def queue_faults(request: Request) -> Response:
        if request.method == "DELETE":
            engine.fault_queue.clear()
        elif request.method == "POST":
            body = await read_json(request)
            raw = body.get("faults") if isinstance(body, dict) else None
            if not isinstance(raw, list):
                raise ApiError('expected {"faults": [{...}, ...]}', param="faults")
            parsed = [(f, parse_fault(f)) for f in raw]  # all or nothing
            engine.fault_queue.extend(parsed)
        return JSONResponse(
            {"queued": len(engine.fault_queue), "faults": [f for f, _ in engine.fault_queue]}
        )

    async def recent_requests(request: Request) -> Response:
        if request.method == "DELETE":
            engine.recent.clear()
        return JSONResponse({"requests": list(engine.recent)})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
        err = ApiError(str(exc.detail), status=exc.status_code, code=code)
        return error_response(err, request_id(request))

    async def server_error(request: Request, exc: Exception) -> Response:
        logging.getLogger("engine").exception("unhandled error")
        err = ApiError(f"internal error: {exc}", status=500, code="internal_error")
        return error_response(err, request_id(request))

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/tokenize", tokenize, methods=["POST"]),
        Route("/detokenize", detokenize, methods=["POST"]),
    ]
    if engine.scripted:
        routes += [
            Route("/_scripted/faults", queue_faults, methods=["GET", "POST", "DELETE"]),
            Route("/_scripted/requests", recent_requests, methods=["GET", "DELETE"]),
        ]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Exception: server_error},
    )
    return RequestIdMiddleware(app)
