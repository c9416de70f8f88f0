"""Every error the public /v1 API can answer, and the one envelope they share.

The body is OpenAI's shape plus the seed's top-level request_id:
``{"error": {"code", "message", "type", "param", ...}, "request_id"}``. `ERRORS` is the
table of codes (status, type, and which retry headers go with each); the OpenAPI
generator reads it, and `error_response` refuses a code that is not in it, so the spec
and the wire cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from completions.schema import ParamsInvalid


@dataclass(frozen=True)
class ErrorSpec:
    status: int
    type: str
    description: str
    retry_after: bool = False  # Retry-After goes with it (every 429, 502, 503)
    should_retry: bool | None = None  # False: X-Should-Retry: false (a retry cannot help)
    upstream: bool = False  # an upstream error: X-Acs-Upstream-Error-Kind mirrors the code


INVALID = "invalid_request_error"
SERVER = "server_error"

ERRORS: dict[str, ErrorSpec] = {
    "invalid_request": ErrorSpec(
        400,
        INVALID,
        "The request breaks a rule of the schema (every field error is listed under "
        "error.errors), its body is not JSON, or a path/query parameter or header is malformed.",
    ),
    "model_not_found": ErrorSpec(400, INVALID, "No model has this short id (see GET /v1/models)."),
    "full_vocab_prompt_too_long": ErrorSpec(
        400,
        INVALID,
        "prompt_logprobs=-1 with a prompt longer than the model's "
        "capabilities.full_vocab_max_prompt_tokens.",
    ),
    "context_length_exceeded": ErrorSpec(
        400, INVALID, "The prompt plus max_tokens does not fit the model's context.", upstream=True
    ),
    "deadline_infeasible": ErrorSpec(
        400,
        INVALID,
        "A non-streaming request whose max_tokens cannot finish inside the request window; "
        "send stream=true or a smaller max_tokens.",
        should_retry=False,
    ),
    "chat_completions_unsupported": ErrorSpec(
        400, INVALID, "There is no chat endpoint: these are base models. Use /v1/completions."
    ),
    "missing_api_key": ErrorSpec(
        401, "authentication_error", "No `Authorization: Bearer <key>` header."
    ),
    "invalid_api_key": ErrorSpec(
        401, "authentication_error", "The key is unknown, revoked, or its user is inactive."
    ),
    "not_found": ErrorSpec(404, INVALID, "No such route under /v1."),
    "job_not_found": ErrorSpec(
        404, INVALID, "No completion job has this id for this key (or its metadata expired)."
    ),
    "method_not_allowed": ErrorSpec(405, INVALID, "The route exists but not for this method."),
    "request_too_large": ErrorSpec(
        413, INVALID, "The request body is larger than the server accepts.", should_retry=False
    ),
    "idempotency_key_reused": ErrorSpec(
        422,
        INVALID,
        "This Idempotency-Key was already used by this key with a different body; "
        "send the same body to get the same job back, or a new key for a new job.",
    ),
    "budget_exceeded": ErrorSpec(
        429,
        "insufficient_quota",
        "Nothing fits in what is left of the key's monthly token budget (resets on the 1st, "
        "UTC; Retry-After says when).",
        retry_after=True,
    ),
    "queue_full": ErrorSpec(
        429,
        "rate_limit_error",
        "The key already has 16 active and 64 waiting requests.",
        retry_after=True,
    ),
    "rate_limited": ErrorSpec(
        429,
        "rate_limit_error",
        "The key started 600 requests in the last minute.",
        retry_after=True,
    ),
    "internal_error": ErrorSpec(500, SERVER, "A bug in Weft; quote the request id."),
    "upstream_error": ErrorSpec(
        502,
        SERVER,
        "The backend failed: an error status, an unreadable answer, or a stream cut midway.",
        retry_after=True,
        upstream=True,
    ),
    "upstream_unavailable": ErrorSpec(
        503,
        SERVER,
        "The backend cannot be reached or is overloaded.",
        retry_after=True,
        upstream=True,
    ),
    "service_unavailable": ErrorSpec(
        503,
        SERVER,
        "Weft's own database or Redis is unavailable for a moment (restarting); retry after "
        "Retry-After.",
        retry_after=True,
    ),
    "upstream_deadline": ErrorSpec(
        504,
        SERVER,
        "The backend did not answer inside the request window; the same request would time "
        "out again.",
        should_retry=False,
        upstream=True,
    ),
}

# Field-error codes of the door's schema that the seed also uses as the top-level code.
TOP_LEVEL_FIELD_CODES = ("model_not_found", "full_vocab_prompt_too_long")
DEFAULT_RETRY_AFTER = 1


class ApiError(Exception):
    """Raised anywhere on the /v1 path; turned into the envelope by the handler."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        param: str | None = None,
        retry_after: float | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        if code not in ERRORS:
            raise ValueError(f"unknown API error code {code!r}: add it to api.errors.ERRORS")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.param = param
        self.retry_after = retry_after
        self.headers = headers or {}
        self.extra = extra

    @property
    def status(self) -> int:
        return ERRORS[self.code].status

    @classmethod
    def from_invalid(cls, exc: ParamsInvalid) -> ApiError:
        """The door's field errors, all of them, under error.errors."""
        first = exc.errors[0]
        code = first.code if first.code in TOP_LEVEL_FIELD_CODES else "invalid_request"
        return cls(
            code,
            f"{first.field}: {first.message}" if first.field else first.message,
            param=first.field or None,
            errors=[e.as_dict() for e in exc.errors],
        )


def envelope(
    code: str, message: str, *, request_id: str, param: str | None = None, **extra: Any
) -> dict[str, Any]:
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "type": ERRORS[code].type,
        "param": param,
        **extra,
    }
    return {"error": error, "request_id": request_id}


def error_headers(code: str, retry_after: float | None = None) -> dict[str, str]:
    """The headers the table says go with this code."""
    spec = ERRORS[code]
    headers: dict[str, str] = {}
    if spec.retry_after:
        seconds = DEFAULT_RETRY_AFTER if retry_after is None else retry_after
        headers["Retry-After"] = str(max(1, int(-(-seconds // 1))))  # whole seconds, rounded up
    if spec.should_retry is False:
        headers["X-Should-Retry"] = "false"
    if spec.upstream:
        headers["X-Acs-Upstream-Error-Kind"] = code
    return headers


def error_response(
    status: int | None,
    code: str,
    message: str,
    *,
    type: str | None = None,
    request_id: str,
    headers: dict[str, str] | None = None,
    retry_after: float | None = None,
    param: str | None = None,
    **extra: Any,
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """(status, headers, body) of an error; status None takes the table's. X-Request-Id
    is always set and equals the body's request_id."""
    spec = ERRORS[code]
    body = envelope(code, message, request_id=request_id, param=param, **extra)
    if type:
        body["error"]["type"] = type
    out = {**error_headers(code, retry_after), **(headers or {}), "X-Request-Id": request_id}
    return status or spec.status, out, body


def api_error_response(exc: ApiError, request_id: str) -> tuple[int, dict[str, str], dict]:
    return error_response(
        None,
        exc.code,
        exc.message,
        request_id=request_id,
        headers=exc.headers,
        retry_after=exc.retry_after,
        param=exc.param,
        **exc.extra,
    )
