"""Faults the scripted backend can be told to produce (see engine/README.md).

A fault is a JSON object; every field is optional:

``status``           429, 500, 502, 503 or 504: answer with that error instead of tokens
``code``             error.code (defaults: 429 rate_limited, 500 internal_error,
                     502 upstream_error, 503 upstream_unavailable, 504 upstream_deadline)
``message``          error.message
``retry_after``      seconds for Retry-After (default 1 on 429/502/503; never on 504,
                     which carries ``X-Should-Retry: false`` instead)
``first_byte_delay`` seconds to wait before the response starts
``token_delay``      seconds to wait per generated token
``cut_after``        N: after N tokens the connection is dropped mid-body (no [DONE])
``cut_mode``         "abort" (default: connection reset, incomplete body) or "eof"
                     (the body just ends, cleanly but without [DONE])
``clamp``            {"applied": M}: generate at most M tokens and send
                     X-Acs-Max-Tokens-Clamped: requested=N,applied=M,reason=budget,source=...
``no_usage``         true: a JSON answer without its `usage` (as some backends send)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.protocol import ApiError

STATUS_CODES = {
    429: "rate_limited",
    500: "internal_error",
    502: "upstream_error",
    503: "upstream_unavailable",
    504: "upstream_deadline",
}
FAULT_FIELDS = frozenset(
    "status code message retry_after first_byte_delay token_delay cut_after cut_mode clamp "
    "no_usage".split()
)


@dataclass(frozen=True)
class Fault:
    status: int | None = None
    code: str | None = None
    message: str | None = None
    retry_after: float | None = None
    first_byte_delay: float = 0.0
    token_delay: float = 0.0
    cut_after: int | None = None
    cut_mode: str = "abort"
    clamp_applied: int | None = None
    no_usage: bool = False

    def error(self) -> ApiError:
        assert self.status is not None
        code = self.code or STATUS_CODES[self.status]
        headers = {"X-Acs-Upstream-Error-Kind": code}
        if self.status == 504:
            headers["X-Should-Retry"] = "false"
        else:
            retry = 1 if self.retry_after is None else self.retry_after
            headers["Retry-After"] = str(int(retry) if float(retry).is_integer() else retry)
        return ApiError(
            self.message or f"scripted fault: {code}",
            status=self.status,
            code=code,
            type="rate_limit_error" if self.status == 429 else "server_error",
            headers=headers,
        )


def _number(obj: dict[str, Any], name: str) -> float | None:
    v = obj.get(name)
    if v is None:
        return None
    if type(v) not in (int, float) or v < 0:
        raise ApiError(f"fault '{name}' must be a non-negative number", param=name)
    return float(v)


def parse_fault(obj: Any) -> Fault:
    """Validate one fault object (raises ApiError 400 on nonsense)."""
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except ValueError as exc:
            raise ApiError(f"fault is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ApiError("a fault must be a JSON object")
    unknown = set(obj) - FAULT_FIELDS
    if unknown:
        raise ApiError(f"Unknown fault field '{sorted(unknown)[0]}'")
    status = obj.get("status")
    if status is not None and status not in STATUS_CODES:
        raise ApiError(f"fault 'status' must be one of {sorted(STATUS_CODES)}", param="status")
    cut = obj.get("cut_after")
    if cut is not None and (type(cut) is not int or cut < 0):
        raise ApiError("fault 'cut_after' must be a non-negative integer", param="cut_after")
    mode = obj.get("cut_mode", "abort")
    if mode not in ("abort", "eof"):
        raise ApiError("fault 'cut_mode' must be 'abort' or 'eof'", param="cut_mode")
    clamp = obj.get("clamp")
    applied = None
    if clamp is not None:
        applied = clamp.get("applied") if isinstance(clamp, dict) else None
        if type(applied) is not int or applied < 1:
            raise ApiError("fault 'clamp' must be {\"applied\": M} with M >= 1", param="clamp")
    for name in ("code", "message"):
        if obj.get(name) is not None and not isinstance(obj[name], str):
            raise ApiError(f"fault '{name}' must be a string", param=name)
    return Fault(
        status=status,
        code=obj.get("code"),
        message=obj.get("message"),
        retry_after=_number(obj, "retry_after"),
        first_byte_delay=_number(obj, "first_byte_delay") or 0.0,
        token_delay=_number(obj, "token_delay") or 0.0,
        cut_after=cut,
        cut_mode=mode,
        clamp_applied=applied,
        no_usage=obj.get("no_usage") is True,
    )
