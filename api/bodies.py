"""Turning a /v1 request body into JSON without stalling the event loop.

A small body is parsed in place. A large one (BIG_BODY_BYTES and up) is parsed in a
child process — json.loads and pydantic hold the GIL, so a thread would stall the loop
just the same: a 6 MB body of a million one-token prompts costs seconds of parsing,
during which every stream and socket of this process would freeze — and there the
output-work rule is read off its prompt count before anything else: such a body is
refused by it without being validated, and without its data ever coming back. One
child per web process; the bodies wait for it, the event loop does not.

Django-free where it runs in the child (`_parse`): it imports only the request schema.

Bounded: a body nested deeper than MAX_DEPTH (no request needs more than a few levels;
5 KB of `[` would otherwise raise RecursionError) is a 400 on either path; the child
may grow by WEFT_API_PARSER_MEMORY_BYTES (RLIMIT_AS) and spend
WEFT_API_PARSER_CPU_SECONDS of CPU on one body (RLIMIT_CPU, moved on before each), and
is killed past WEFT_API_PARSER_TIMEOUT_SECONDS. A body that hits a limit is a 413; the
bodies that were waiting behind it are parsed again in a new child, and the web
process never notices.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import multiprocessing
import os
import resource
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from api.errors import ApiError
from completions.schema import FieldError, ParamsInvalid, output_work_exceeded

log = logging.getLogger(__name__)

BIG_BODY_BYTES = 64 * 1024
# Deeper than any request of the schema (a list of token lists inside the body is 3).
MAX_DEPTH = 32
PR_SET_PDEATHSIG = 1
_pool: ProcessPoolExecutor | None = None


def _too_deep(data: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `data` nests lists and objects more than `limit` deep (without
    recursion: what it guards against is recursion)."""
    stack = [(data, 1)] if isinstance(data, (list, dict)) else []
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        for item in value.values() if isinstance(value, dict) else value:
            if isinstance(item, (list, dict)):
                stack.append((item, depth + 1))
    return False


def _cpu_budget(seconds: int) -> None:
    """Let this (long-lived) child spend `seconds` more CPU from now: RLIMIT_CPU counts
    the process's whole life, so its soft limit moves on before each body. Past it the
    kernel's SIGXCPU ends the child."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(usage.ru_utime + usage.ru_stime) + 1 + seconds
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _parse(raw: bytes, cpu_seconds: int = 0) -> tuple[str, Any]:
    """("ok", data), ("invalid", error) or ("json" | "deep" | "memory", None): what the
    child sends back."""
    if cpu_seconds:
        _cpu_budget(cpu_seconds)
    try:
        return _read(raw)
    except MemoryError:
        return "memory", None


def _read(raw: bytes) -> tuple[str, Any]:
    try:
        data = json.loads(raw)
    except RecursionError:
        return "deep", None
    except (ValueError, UnicodeDecodeError):
        return "json", None
    if _too_deep(data):
        return "deep", None
    error = output_work_exceeded(data)
    if error is not None:
        return "invalid", error
    return "ok", data


def _outcome(found: tuple[str, Any]) -> Any:
    kind, value = found
    if kind == "json":
        raise ApiError("invalid_request", "the body is not valid JSON")
    if kind == "deep":
        raise ApiError(
            "invalid_request", f"the body nests arrays and objects more than {MAX_DEPTH} deep"
        )
    if kind == "memory":
        raise _too_costly()
    if kind == "invalid":
        assert isinstance(value, FieldError)
        raise ApiError.from_invalid(ParamsInvalid([value]))
    return value


def _too_costly() -> ApiError:
    return ApiError(
        "request_too_large",
        "the body needs more memory or time to read than one request may have",
    )


def _vm_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


def _die_with(parent: int, memory_bytes: int = 0) -> None:
    """The child's start: it dies with its web process, however that one ends (the
    launcher's own children do the same, so nothing outlives `make run`); it may grow
    by `memory_bytes` beyond what it holds once started (its interpreter and imports)."""
    if sys.platform == "linux":
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a SIGXCPU leaves no core
        if memory_bytes:
            limit = _vm_bytes() + memory_bytes
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if os.getppid() != parent:  # the web process was gone before prctl
        os._exit(0)


def _executor() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        from django.conf import settings

        # spawn: a fork of a process with an event loop and threads is not safe. (As
        # with every spawned child, the parent's main module must be importable: it
        # is uvicorn's, or a script's behind `if __name__ == "__main__"`.)
        _pool = ProcessPoolExecutor(
            1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_die_with,
            initargs=(os.getpid(), settings.WEFT_API_PARSER_MEMORY_BYTES),
        )
    return _pool


def _discard(pool: ProcessPoolExecutor) -> None:
    """End a child that is stuck or gone; the next body starts another."""
    global _pool
    if _pool is pool:
        _pool = None
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.kill()
    pool.shutdown(wait=False, cancel_futures=True)


async def parse(raw: bytes | None, limit: int) -> Any:
    """The body as JSON, or ApiError (too large, too deep, too costly to read, not
    JSON, or too many prompts for the output-work rule)."""
    from django.conf import settings

    if raw is None:
        raise ApiError("request_too_large", f"the body is larger than {limit:,} bytes")
    if len(raw) < BIG_BODY_BYTES:
        return _outcome(_parse(raw))
    loop = asyncio.get_running_loop()
    cpu, timeout = settings.WEFT_API_PARSER_CPU_SECONDS, settings.WEFT_API_PARSER_TIMEOUT_SECONDS
    # A child that dies mid-body may have died of another body (the one it was reading
    # when this one waited): each body gets a second child before it is blamed.
    for attempt in (1, 2):
        pool = _executor()
        try:
            found = await asyncio.wait_for(loop.run_in_executor(pool, _parse, raw, cpu), timeout)
        except (BrokenProcessPool, TimeoutError):
            log.warning("api: the body parser's process died or overran; starting another")
            _discard(pool)
            if attempt == 2:
                raise _too_costly() from None
        else:
            return _outcome(found)
    raise AssertionError("unreachable")


def shutdown() -> None:
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None
