"""HTTP plumbing shared by the routes: the error envelope, request ids, JSON bodies."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.protocol import ApiError


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


def api_errors(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """ApiError raised by a route becomes its error response."""

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
