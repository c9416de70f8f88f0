"""Typed errors for everything the completion backend can answer.

The seed's error envelope is ``{"error": {"code", "message", "type"}, "request_id"}``;
``error_from_response`` turns one into the matching subclass so callers handle
``error.code`` programmatically and show ``request_id`` in bug reports.
"""

from __future__ import annotations

from typing import Any


class BackendError(Exception):
    """An error answered (or caused) by the completion backend."""

    default_code = "backend_error"

    def __init__(
        self,
        code: str | None = None,
        message: str = "",
        status: int | None = None,
        request_id: str = "",
        retry_after: float | None = None,
        *,
        should_retry: bool | None = None,
    ) -> None:
        self.code = code or self.default_code
        self.message = message or self.code
        self.status = status
        self.request_id = request_id
        self.retry_after = retry_after
        self.should_retry = should_retry
        super().__init__(f"{self.code} ({status}): {self.message}")

    @property
    def retryable(self) -> bool:
        """Whether the seed says the same request may succeed later: 429 queue_full /
        rate_limited, 502 and 503 — never 504 or anything marked X-Should-Retry: false."""
        if self.should_retry is False:
            return False
        if self.status == 429:
            return self.code in ("queue_full", "rate_limited")
        return self.status in (502, 503)


class BudgetExceeded(BackendError):
    default_code = "budget_exceeded"


class QueueFull(BackendError):
    default_code = "queue_full"


class RateLimited(BackendError):
    default_code = "rate_limited"


class ModelNotFound(BackendError):
    default_code = "model_not_found"


class InvalidRequest(BackendError):
    default_code = "invalid_request"


class UpstreamError(BackendError):
    """A 5xx from the backend, or a stream that ended without [DONE]."""

    default_code = "upstream_error"


class UpstreamTimeout(BackendError):
    """504 upstream_deadline, or our own read timeout."""

    default_code = "upstream_deadline"


class BackendUnavailable(BackendError):
    """503, or the backend could not be reached at all."""

    default_code = "upstream_unavailable"


class Clamped(BackendError):
    """The backend reduced max_tokens (X-Acs-Max-Tokens-Clamped): Weft refuses such a
    run instead of showing a shorter result as complete."""

    default_code = "max_tokens_clamped"


_BY_CODE: dict[str, type[BackendError]] = {
    "budget_exceeded": BudgetExceeded,
    "queue_full": QueueFull,
    "rate_limited": RateLimited,
    "model_not_found": ModelNotFound,
}


def error_class(status: int, code: str) -> type[BackendError]:
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status == 429:
        return RateLimited
    if status == 504:
        return UpstreamTimeout
    if status == 503:
        return BackendUnavailable
    if status >= 500:
        return UpstreamError
    return InvalidRequest


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        # RFC 7231 also allows an HTTP date.
        from datetime import UTC, datetime
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds)


def error_from_envelope(
    status: int, body: Any, headers: Any, *, request_id: str = ""
) -> BackendError:
    """Build the typed error from a status, a parsed body (or None) and headers."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {}
    code = error.get("code") or headers.get("x-acs-upstream-error-kind") or ""
    if not isinstance(code, str) or not code:
        code = {429: "rate_limited", 503: "upstream_unavailable", 504: "upstream_deadline"}.get(
            status, "upstream_error" if status >= 500 else "invalid_request"
        )
    message = error.get("message") if isinstance(error.get("message"), str) else ""
    rid = request_id or headers.get("x-request-id") or ""
    if not rid and isinstance(body, dict) and isinstance(body.get("request_id"), str):
        rid = body["request_id"]
    should = headers.get("x-should-retry")
    cls = error_class(status, code)
    return cls(
        code,
        message or f"the backend answered {status}",
        status,
        rid,
        parse_retry_after(headers.get("retry-after")),
        should_retry=None if should is None else should.strip().lower() != "false",
    )
