"""Turning a /v1 request body into JSON without stalling the event loop.

A small body is parsed in place. A large one (BIG_BODY_BYTES and up) is parsed in a
child process — json.loads and pydantic hold the GIL, so a thread would stall the loop
just the same: a 6 MB body of a million one-token prompts costs seconds of parsing,
during which every stream and socket of this process would freeze — and there the
output-work rule is read off its prompt count before anything else: such a body is
refused by it without being validated, and without its data ever coming back. One
child per web process; the bodies wait for it, the event loop does not.

Django-free where it runs in the child (`_parse`): it imports only the request schema.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from api.errors import ApiError
from completions.schema import FieldError, ParamsInvalid, output_work_exceeded

log = logging.getLogger(__name__)

BIG_BODY_BYTES = 64 * 1024
PR_SET_PDEATHSIG = 1
_pool: ProcessPoolExecutor | None = None


def _parse(raw: bytes) -> tuple[str, Any]:
    """("ok", data) or ("invalid", error): what the child sends back."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return "json", None
    error = output_work_exceeded(data)
    if error is not None:
        return "invalid", error
    return "ok", data


def _outcome(found: tuple[str, Any]) -> Any:
    kind, value = found
    if kind == "json":
        raise ApiError("invalid_request", "the body is not valid JSON")
    if kind == "invalid":
        assert isinstance(value, FieldError)
        raise ApiError.from_invalid(ParamsInvalid([value]))
    return value


def _die_with(parent: int) -> None:
    """The child's start: it dies with its web process, however that one ends (the
    launcher's own children do the same, so nothing outlives `make run`)."""
    if sys.platform == "linux":
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the web process was gone before prctl
        os._exit(0)


def _executor() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        # spawn: a fork of a process with an event loop and threads is not safe. (As
        # with every spawned child, the parent's main module must be importable: it
        # is uvicorn's, or a script's behind `if __name__ == "__main__"`.)
        _pool = ProcessPoolExecutor(
            1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_die_with,
            initargs=(os.getpid(),),
        )
    return _pool


async def parse(raw: bytes | None, limit: int) -> Any:
    """The body as JSON, or ApiError (too large, not JSON, or too many prompts for the
    output-work rule)."""
    global _pool
    if raw is None:
        raise ApiError("request_too_large", f"the body is larger than {limit:,} bytes")
    if len(raw) < BIG_BODY_BYTES:
        return _outcome(_parse(raw))
    loop = asyncio.get_running_loop()
    try:
        found = await loop.run_in_executor(_executor(), _parse, raw)
    except BrokenProcessPool:  # the child died (killed, out of memory): a new one next time
        log.error("api: the body parser's process died; starting another")
        _pool = None
        raise ApiError("internal_error", "the body could not be read; send it again") from None
    return _outcome(found)


def shutdown() -> None:
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None
