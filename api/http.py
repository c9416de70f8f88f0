"""The small ASGI plumbing of /v1: one request's scope, its body, and its responses.

/v1 is served at the ASGI level (config/asgi.py sends it here before Django), so no
session, CSRF, login or HTML error handling ever touches it, and a request costs what
the proxy does rather than Django's middleware stack. Everything still uses Django's
settings and models.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import time
import traceback
import zlib
from collections.abc import Awaitable
from typing import Any

from django.conf import settings
from django.utils import timezone

from api.errors import ApiError, api_error_response
from core import metrics
from core.logs import new_request_id

log = logging.getLogger("api")

GZIP_MIN_BYTES = 1024  # below this, compressing costs more time than it saves
GZIP_LEVEL = 5


class ClientGone(Exception):
    """The client disconnected before its request was read: nobody to answer."""


ECHO_MAX = 80


def shown(text: str, limit: int = ECHO_MAX) -> str:
    """Part of the request (a path, a parameter's name) as an error message may quote
    it: at most `limit` characters, and escaped where not printable — a NUL, or a lone
    surrogate (which another ASGI server may pass in a path, and which cannot be
    encoded as UTF-8 at all)."""
    return repr(text[:limit])[1:-1] + ("…" if len(text) > limit else "")


class Request:
    """One /v1 request: what came in, and the headers every answer to it carries."""

    def __init__(self, scope: dict, receive: Any, send: Any) -> None:
        self.scope = scope
        self.receive = receive
        self._send = send
        self.id = new_request_id()
        self.started = time.perf_counter()
        self.created_at = timezone.now()
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        headers: dict[str, str] = {}
        for name, value in scope.get("headers", ()):
            headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
        self.headers = headers
        client = scope.get("client")
        self.ip: str | None = client[0] if client else None
        self.extra_headers: dict[str, str] = {}  # upstream model/gpu, clamp
        self.started_response = False
        self.finished_response = False
        self.status = 0
        self.client_gone = False
        self.body_read = asyncio.Event()
        self.first_byte_at: float | None = None  # perf_counter() of the body's first byte
        self.observed = False  # counted in the metrics (core/metrics.py)
        self.streaming = ""  # the route label of the event stream being sent

    # -- what came in ------------------------------------------------------------------

    @property
    def accepts_gzip(self) -> bool:
        for part in self.headers.get("accept-encoding", "").split(","):
            name, _, params = part.strip().partition(";")
            if name.strip().lower() in ("gzip", "*"):
                return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
        return False

    @property
    def workload(self) -> str:
        value = self.headers.get("x-acs-workload", "").strip().lower()
        return value if value in ("interactive", "batch") else ""

    def latency_ms(self) -> int:
        return int((time.perf_counter() - self.started) * 1000)

    async def read_body(self) -> bytes | None:
        """The whole body, or None when it is larger than WEFT_API_MAX_BODY_BYTES —
        known from Content-Length before reading anything, or while reading."""
        limit = settings.WEFT_API_MAX_BODY_BYTES
        declared = self.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                message = await self.receive()
                if message["type"] == "http.disconnect":
                    self.client_gone = True
                    raise ClientGone
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    return None
                chunks.append(chunk)
                if not message.get("more_body"):
                    return b"".join(chunks)
        finally:
            self.body_read.set()

    async def until_disconnect(self, work: Awaitable[None], *, reads_body: bool = False) -> None:
        """Run `work`; if the client goes away first, cancel it (which closes the
        upstream request and settles what was generated). `reads_body`: `work` reads
        the body itself (read_body notices a disconnect meanwhile); the watch for one
        starts after it."""
        task = asyncio.ensure_future(work)
        watcher = asyncio.ensure_future(self._wait_disconnect(after_body=reads_body))
        try:
            await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if self.finished_response:  # the client left after the whole answer: fine
                await asyncio.wait({task})
        finally:
            if not task.done():
                self.client_gone = True
                task.cancel()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error

    async def _wait_disconnect(self, *, after_body: bool = False) -> None:
        if after_body:
            await self.body_read.wait()
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                return

    # -- what goes out ------------------------------------------------------------------

    def _header_list(self, headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
        merged = {**self.extra_headers, **headers, "X-Request-Id": self.id}
        return [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in merged.items()]

    async def start(self, status: int, headers: dict[str, str]) -> None:
        self.started_response = True
        self.status = status
        if headers.get("Content-Type", "").startswith("text/event-stream"):
            metrics.stream_started(self)
        await self._send(
            {"type": "http.response.start", "status": status, "headers": self._header_list(headers)}
        )

    async def body(self, data: bytes, *, more: bool = False) -> None:
        if data and self.first_byte_at is None:
            self.first_byte_at = time.perf_counter()
        await self._send({"type": "http.response.body", "body": data, "more_body": more})
        if not more:
            self.finished_response = True

    async def json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
        if len(data) >= GZIP_MIN_BYTES and self.accepts_gzip:
            data = gzip.compress(data, compresslevel=GZIP_LEVEL)
            headers["Content-Encoding"] = "gzip"
            headers["Vary"] = "Accept-Encoding"
        headers["Content-Length"] = str(len(data))
        await self.start(status, headers)
        await self.body(data)

    async def error(self, exc: ApiError) -> None:
        status, headers, payload = api_error_response(exc, self.id)
        if self.started_response:
            return  # too late for a status; the caller ends the stream instead
        await self.json(status, payload, headers)


class GzipStream:
    """Compresses a body that is passed through chunk by chunk (never held whole)."""

    def __init__(self) -> None:
        self._z = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)

    def feed(self, data: bytes) -> bytes:
        return self._z.compress(data)

    def finish(self) -> bytes:
        return self._z.flush()


def log_bug(req: Request, exc: BaseException) -> None:
    """An unexpected exception on the /v1 path: its type and traceback frames, never its
    message (which could quote the request's input)."""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    log.error("api %s %s: %s (request %s)\n%s", req.method, req.path, type(exc).__name__,
              req.id, frames)  # fmt: skip
