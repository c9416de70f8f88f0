"""What the API makes of the backend's answer, on both of its paths (the synchronous
proxy, api/proxy.py, and the jobs' executor, api/jobs.py): the backend's failure as the
seed's code, and the usage read off the tail of a body that is never held."""

from __future__ import annotations

import json
from typing import Any

from api.errors import ERRORS, ApiError
from completions.errors import BackendError, BackendUnavailable, ModelNotFound, UpstreamTimeout

USAGE_MARK = b'"usage":'


def upstream_error(exc: BackendError) -> ApiError:
    """The seed's code for whatever the backend did (its 4xx/5xx, a timeout, no answer)."""
    status = exc.status
    message = f"the backend answered: {exc.message}" if exc.message else "the backend failed"
    if isinstance(exc, ModelNotFound):
        return ApiError("model_not_found", exc.message, param="model")
    if isinstance(exc, UpstreamTimeout) or status == 504:
        return ApiError("upstream_deadline", message)
    if isinstance(exc, BackendUnavailable) or status in (429, 503):
        return ApiError("upstream_unavailable", message, retry_after=exc.retry_after)
    if status is not None and 400 <= status < 500 and status not in (401, 403, 407):
        # The backend refused the request itself (e.g. context_length_exceeded): a 400.
        known = exc.code in ERRORS and ERRORS[exc.code].status == 400
        code = exc.code if known else None
        return ApiError(
            code or "invalid_request",
            message,
            headers={"X-Acs-Upstream-Error-Kind": code or exc.code or "invalid_request"},
        )
    return ApiError("upstream_error", message, retry_after=exc.retry_after)


def usage_from_tail(tail: bytes) -> dict[str, Any] | None:
    """The body's usage object, read from its last bytes (the body is never held)."""
    at = tail.rfind(USAGE_MARK)
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(tail[at + len(USAGE_MARK) :].decode().lstrip())
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None
