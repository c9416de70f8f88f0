"""What the backend's answers mean, for both paths of the door (the pages' client,
completions/client.py, and the /v1 proxy's raw path, completions/passthrough.py): a
body parsed with what Postgres cannot hold made U+FFFD, the seed's error envelope and
a broken connection as completions.errors' typed errors, a clamped run refused, and a
streamed completion's chunks. Logs carry hosts and codes, never prompt or completion
text."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import EventSource

from completions.errors import (
    MODEL_MAX,
    REQUEST_ID_MAX,
    BackendError,
    BackendUnavailable,
    Clamped,
    UpstreamError,
    UpstreamTimeout,
    clean_text,
    error_from_envelope,
)
from config.env import without_credentials

log = logging.getLogger(__name__)


@dataclass
class Completion:
    body: dict[str, Any]
    request_id: str
    model: str
    clamped: str | None = None

    @property
    def usage(self) -> dict[str, Any] | None:
        return self.body.get("usage")


_LONE_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_json(text: str) -> Any:
    """Parse a backend body. A token can decode to U+0000 (byte 0, e.g. in a
    full-vocabulary distribution) and Postgres text/jsonb cannot hold it, nor a lone
    UTF-16 surrogate (which JSON escapes allow), so both become U+FFFD here, at the
    door, before anything is stored."""
    value = json.loads(text)
    if "\\u0000" in text or "\x00" in text or _LONE_SURROGATE_ESCAPE.search(text):
        return _scrub_nul(value)
    return value


def _scrub_nul(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value.replace("\x00", "\ufffd"))
    if isinstance(value, list):
        return [_scrub_nul(item) for item in value]
    if isinstance(value, dict):
        return {_scrub_nul(key): _scrub_nul(item) for key, item in value.items()}
    return value


def completion(response: httpx.Response, refuse_clamped: bool) -> Completion:
    """A non-streamed answer, its body as the backend sent it."""
    request_id, clamped = check_ok(response, refuse_clamped)
    try:
        body = parse_json(response.text)
    except ValueError:
        raise UpstreamError(
            "bad_response",
            "the backend answered with invalid JSON",
            response.status_code,
            request_id,
        ) from None
    if isinstance(body, dict) and "error" in body:
        # An error in a 200 body (the seed's rare case after a cold boot).
        raise error_from_envelope(500, body, response.headers, request_id=request_id)
    if not isinstance(body, dict):
        raise UpstreamError(
            "bad_response",
            "the backend answered with a non-object",
            response.status_code,
            request_id,
        )
    return Completion(body, request_id, clean_text(body.get("model"), MODEL_MAX), clamped)


def error_for_response(response: httpx.Response) -> BackendError:
    """The typed error of an error status, from the seed's envelope when it sent one."""
    try:
        body = parse_json(response.text)
    except ValueError:
        body = None
    return error_from_envelope(response.status_code, body, response.headers)


def transport_error(exc: httpx.HTTPError, request_id: str = "") -> BackendError:
    """The typed error of a request that got no (whole) answer."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        # The error's text may hold the backend's host and port (asyncio's "Connect call
        # failed ('10.0.0.7', 8000)"): the log keeps it, the message (shown to API
        # clients and on pages) does not.
        try:
            where = without_credentials(str(exc.request.url))
        except RuntimeError:  # raised without its request
            where = "?"
        log.warning("backend connection to %s failed: %s", where, str(exc)[:300])
        return BackendUnavailable(
            "connect_error", f"backend unavailable ({type(exc).__name__})", None, request_id
        )
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeout("timeout", "the backend did not answer in time", None, request_id)
    return UpstreamError(
        "stream_incomplete", f"the connection broke: {type(exc).__name__}", None, request_id
    )


def check_ok(response: httpx.Response, refuse_clamped: bool) -> tuple[str, str | None]:
    """Raise for an error status or a clamped run; return (request_id, clamped header)."""
    request_id = clean_text(response.headers.get("x-request-id"), REQUEST_ID_MAX)
    if response.status_code >= 400:
        raise error_for_response(response)
    clamped = response.headers.get("x-acs-max-tokens-clamped")
    if clamped and refuse_clamped:
        raise Clamped(
            "max_tokens_clamped",
            f"the backend would shorten this run ({clamped}); Weft refuses it instead",
            response.status_code,
            request_id,
        )
    return request_id, clamped


class CompletionStream:
    """The parsed SSE chunks of one streamed completion. Raises UpstreamError
    ("stream_incomplete") when the stream ends without [DONE], UpstreamTimeout when
    the backend goes quiet past the read timeout, and the typed error for an in-body
    error frame."""

    def __init__(self, response: httpx.Response, request_id: str, clamped: str | None) -> None:
        self.response = response
        self.request_id = request_id
        self.clamped = clamped
        self.model = clean_text(response.headers.get("x-acs-upstream-model"), MODEL_MAX)
        self.usage: dict[str, Any] | None = None
        self.finished = False

    def _parse(self, data: str) -> dict[str, Any] | None:
        if data.strip() == "[DONE]":
            self.finished = True
            return None
        try:
            chunk = parse_json(data)
        except ValueError:
            raise UpstreamError(
                "bad_stream", "the backend sent a frame that is not JSON", 200, self.request_id
            ) from None
        if not isinstance(chunk, dict):
            raise UpstreamError(
                "bad_stream", "the backend sent a frame that is not an object", 200, self.request_id
            )
        if "error" in chunk:
            # An in-body error after the 200 headers went out (the seed's cold-boot
            # case): its code picks the class; there is no real status to give.
            raise error_from_envelope(500, chunk, {}, request_id=self.request_id)
        if chunk.get("model"):
            self.model = clean_text(chunk["model"], MODEL_MAX)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        return chunk

    def _incomplete(self) -> UpstreamError:
        return UpstreamError(
            "stream_incomplete", "the stream ended before [DONE]", 200, self.request_id
        )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for sse in EventSource(self.response).iter_sse():
                chunk = self._parse(sse.data)
                if chunk is None:
                    return
                yield chunk
        except httpx.HTTPError as exc:
            raise transport_error(exc, self.request_id) from exc
        raise self._incomplete()

    def close(self) -> None:
        self.response.close()
