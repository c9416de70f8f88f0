"""Typed errors for everything the completion backend can answer.

The seed's error envelope is ``{"error": {"code", "message", "type"}, "request_id"}``;
``error_from_response`` turns one into the matching subclass so callers handle
``error.code`` programmatically and show ``request_id`` in bug reports.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

# Backend-supplied strings end up in these columns of completions.Generation; longer
# (or NUL-carrying) values would make the final save fail and the run look lost.
REQUEST_ID_MAX = 200
CODE_MAX = 100
MODEL_MAX = 300
MESSAGE_MAX = 2000
# The longest Retry-After we keep (a day); a larger one is still "longer than we wait".
RETRY_AFTER_MAX = 86_400.0
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(value: Any, limit: int, *, one_line: bool = True) -> str:
    """A backend-supplied value made safe to store and show: a string (anything else
    becomes ""), without NUL or other control characters, at most `limit` characters."""
    if not isinstance(value, str):
        return ""
    value = _CONTROL.sub("\ufffd" if not one_line else "", value)
    if one_line:
        value = value.replace("\r", " ").replace("\n", " ").replace("\t", " ")
    return value[:limit]


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
        self.code = clean_text(code, CODE_MAX) or self.default_code
        self.message = clean_text(message, MESSAGE_MAX, one_line=False) or self.code
        self.status = status
        self.request_id = clean_text(request_id, REQUEST_ID_MAX)
        self.retry_after = _bounded_seconds(retry_after)
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


class TokenizerMissing(BackendError):
    """The backend has no /tokenize or /detokenize (404, 405, 501), as the seed's hosted
    API: counts and ids are then unknown, which callers treat as "cannot say"."""

    default_code = "tokenizer_missing"


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


def _bounded_seconds(value: float | None) -> float | None:
    """None for nothing usable (NaN, infinite, negative), else at most a day."""
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    if value < 0:
        return None
    return min(float(value), RETRY_AFTER_MAX)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when
    absent or unusable ("inf", "nan", negative, garbage). Capped at RETRY_AFTER_MAX."""
    if not value or not isinstance(value, str) or len(value) > 64:
        return None
    try:
        seconds = float(value)
    except ValueError:
        # RFC 9110 also allows an HTTP date.
        try:
            when = parsedate_to_datetime(value)
            if when.tzinfo is None:  # "-0000": RFC 5322 says UTC, Python leaves it naive
                when = when.replace(tzinfo=UTC)
            seconds = max(0.0, (when - datetime.now(UTC)).total_seconds())
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    return _bounded_seconds(seconds)


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
