"""What a log line is about, and JSON lines (WEFT_LOG_FORMAT=json).

Each process binds the ids of what it is doing to the current context — a page
request's id and user (core.middleware.RequestIdMiddleware), a /v1 request's id, key
prefix and user (api/asgi.py, api/auth.py), a worker's run (`bind_task`, on Celery's
task signals) — and every line logged meanwhile carries them. Only ids: a line never
holds a prompt, a completion or anything else a user wrote, whatever the format.
"""

from __future__ import annotations

import contextvars
import json
import logging
import traceback
import uuid
from datetime import UTC, datetime
from typing import Any

FIELDS = ("request_id", "key_prefix", "user_id", "run_id")
_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "weft_log_context", default=None
)


def new_request_id() -> str:
    """The id of one request, page or /v1 (the seed's X-Request-Id), that its lines carry."""
    return "req-" + uuid.uuid4().hex


def bind(**ids: Any) -> contextvars.Token:
    """Add ids (of FIELDS) to this context's lines; returns the token for `reset`."""
    unknown = set(ids) - set(FIELDS)
    if unknown:
        raise ValueError(f"not a log field: {sorted(unknown)}")
    current = _context.get() or {}
    return _context.set({**current, **{k: v for k, v in ids.items() if v not in (None, "")}})


def reset(token: contextvars.Token) -> None:
    _context.reset(token)


def clear() -> None:
    _context.set(None)


def current() -> dict[str, Any]:
    return dict(_context.get() or {})


class ContextFilter(logging.Filter):
    """Puts the bound ids on every record (as attributes, for any formatter)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_context.get() or {}).items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the bound ids, and the
    traceback of an exception (frames only: messages are the code's own)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info and record.exc_info[1] is not None:
            line["exception"] = frames_only(record.exc_info[1])
        return json.dumps(line, ensure_ascii=False, default=str)


def frames_only(exc: BaseException) -> str:
    """A traceback without what the exceptions say: their types and the frames (file,
    line, function and the line of code, all the code's own), oldest cause first. An
    exception's message may hold anything its raiser put there — a database error's
    holds the failing statement's values and the server's detail, which can be a
    user's text or a host's name."""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    link = ""
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, "The above exception was the direct cause of:"
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, "During handling of the above exception:"
        else:
            current = None
    parts: list[str] = []
    # Oldest first, as Python prints a chain; the line linking two stands between them.
    oldest_first = list(reversed(chain))
    for at, (one, _) in enumerate(oldest_first):
        if at:
            parts.append(oldest_first[at - 1][1])
        parts.append("Traceback (most recent call last):")
        parts.extend(traceback.format_list(traceback.extract_tb(one.__traceback__)))
        kind = type(one)
        parts.append(f"{kind.__module__}.{kind.__qualname__}")
    return "\n".join(part.rstrip("\n") for part in parts)


# Celery tasks whose first argument is the id of the run they work on.
RUN_TASKS = {
    # A turn on a queue: the message names the run it was sent for (the worker may
    # claim another, completions.scheduler).
    "completions.tasks.run_generation": "generation",
}


def bind_task(task_name: str, args: Any) -> None:
    """On a worker, before a task runs (Celery's task_prerun): its run's id, if any."""
    clear()
    kind = RUN_TASKS.get(task_name)
    if kind and args:
        bind(run_id=f"{kind}-{args[0]}")
