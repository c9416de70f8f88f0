"""The HTTP surface: vLLM's OpenAI-compatible API on Starlette.

Model work runs on the scheduler's single model thread (engine/scheduler.py), which
batches every active request together; completion responses live in
engine/responses.py and the scripted backend's test hooks in engine/scripted.py.
Tokenizing only reads the vocabulary, so it runs on a small thread pool of its own and
never waits for a decode step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from engine.faults import Fault
from engine.generate import FULL_VOCAB_MAX_PROMPT_TOKENS, prepare
from engine.http import RequestIdMiddleware, api_errors, error_response, read_json, request_id
from engine.models import Model
from engine.protocol import ApiError, parse_completion
from engine.responses import CompletionResponse
from engine.scheduler import BULK, DEFAULT_STEP_TOKENS, INTERACTIVE, Scheduler
from engine.scripted import ScriptedHooks

T = TypeVar("T")


@dataclass
class Engine:
    model: Model
    backend: str = "llama"
    max_logprobs: int = 20
    token_delay: float = 0.0
    server_fault: Fault | None = None
    max_sequences: int = 16
    step_tokens: int = DEFAULT_STEP_TOKENS
    scheduler: Scheduler = field(init=False)
    hooks: ScriptedHooks | None = field(init=False)
    tokenizer: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(2, thread_name_prefix="tokenize")
    )
    # Two: full-vocabulary encoding is numpy work that releases the GIL (engine/encode.py).
    encoder: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(2, thread_name_prefix="encode")
    )
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        self.model.pieces  # noqa: B018 -- built once, before threads share it
        self.scheduler = Scheduler(
            self.model, max_sequences=self.max_sequences, step_tokens=self.step_tokens
        )
        self.scheduler.start()
        self.hooks = ScriptedHooks(self.server_fault) if self.scripted else None

    @property
    def scripted(self) -> bool:
        return self.backend == "scripted"

    async def tokenize(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.tokenizer, fn, *args)

    async def encode(self, fn: Callable[..., T], *args: Any) -> T:
        """CPU-heavy encoding (full-vocabulary bodies) off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.encoder, fn, *args)

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
                "vocab_size": m.vocab_size,  # what a full-vocabulary position holds
            },
        }

    async def record(self, request: Request) -> None:
        if self.hooks is not None:
            await self.hooks.record(request)


def build_app(engine: Engine) -> ASGIApp:
    model = engine.model

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "backend": engine.backend,
                "model": model.model_id,
                **engine.scheduler.stats(),
            }
        )

    async def models(request: Request) -> Response:
        await engine.record(request)
        return JSONResponse({"object": "list", "data": [engine.model_card()]})

    @api_errors
    async def completions(request: Request) -> Response:
        await engine.record(request)
        fault = engine.hooks.take_fault(request) if engine.hooks else None
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
        prep = await engine.tokenize(prepare, model, req)
        # Weft's page runs ask for the engine first (engine.scheduler: Priority).
        urgent = request.headers.get("x-weft-priority") == "interactive"
        priority = INTERACTIVE if urgent else BULK
        return CompletionResponse(engine, prep, fault, request_id(request), priority)  # type: ignore[return-value]

    async def chat(request: Request) -> Response:
        await engine.record(request)
        err = ApiError(
            "These are base models: use POST /v1/completions (no chat template).",
            code="chat_completions_unsupported",
        )
        return error_response(err, request_id(request))

    async def _read_object(request: Request, fields: tuple[str, ...]) -> dict[str, Any]:
        """The JSON object body of /tokenize or /detokenize: only `fields`, a known model."""
        body = await read_json(request)
        if not isinstance(body, dict):
            raise ApiError("Request body must be a JSON object")
        for key in body:
            if key not in fields:
                raise ApiError(f"Unknown field '{key}'", param=key)
        name = body.get("model")
        if name is not None and name != model.model_id:
            raise ApiError(
                f"The model '{name}' does not exist", code="model_not_found", param="model"
            )
        return body

    @api_errors
    async def tokenize(request: Request) -> Response:
        await engine.record(request)
        body = await _read_object(
            request, ("model", "prompt", "add_special_tokens", "return_token_strs")
        )
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ApiError("'prompt' must be a string", param="prompt")
        special = body.get("add_special_tokens", True)
        strs = body.get("return_token_strs", False)
        for name, value in (("add_special_tokens", special), ("return_token_strs", strs)):
            if type(value) is not bool:
                raise ApiError(f"'{name}' must be a boolean", param=name)
        tokens = await engine.tokenize(model.tokenize, prompt, special)
        return JSONResponse(
            {
                "count": len(tokens),
                "max_model_len": model.max_model_len,
                "tokens": tokens,
                "token_strs": [model.pieces[t] for t in tokens] if strs else None,
            }
        )

    @api_errors
    async def detokenize(request: Request) -> Response:
        await engine.record(request)
        body = await _read_object(request, ("model", "tokens"))
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(
            type(t) is int and 0 <= t < model.vocab_size for t in tokens
        ):
            raise ApiError("'tokens' must be a list of token ids", param="tokens")
        return JSONResponse({"prompt": await engine.tokenize(model.decode, tokens)})

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
    if engine.hooks is not None:
        routes += engine.hooks.routes()
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Exception: server_error},
    )
    return RequestIdMiddleware(app)
