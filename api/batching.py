"""Calls to a local server (Postgres, Redis) from concurrent /v1 requests, sent together.

Each send to a local server wakes it, and on two shared cores the sender then often
waits for its turn again (profiled under a burst of 64 streams, the moments around
sends were the largest share of the web process' time); the server pays for each
wake-up and each statement's commit too. A burst's requests make the same calls at
nearly the same moment, so each call here waits in a queue and the queue goes out as
one batch (one pipeline: one send, one read): a call that arrives while AT_ONCE
batches are out waits for the next, which takes everything waiting, up to SIZE. A
call alone goes out at once.

Urgent calls (on a request's way to the backend) go before the others (bookkeeping
after the response). A caller cancelled while its call is out (its client gone) is not
told the result; `orphaned` is, to undo what the call did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

SIZE = 32
AT_ONCE = 2  # one batch being sent while one is answered


@dataclass(eq=False)
class Call:
    payload: Any  # what the batch's sender needs to make the call
    order: int = 0  # within a batch, calls are sent sorted by this (stable)
    orphaned: Callable[[Any], None] | None = None
    result: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


Sender = Callable[[list[Call]], Awaitable[list[Any]]]


class Batcher:
    """One queue of calls on one event loop. `send` makes a batch's calls and returns,
    for each, its result or the exception it raised (an exception it raises itself
    fails the whole batch)."""

    def __init__(self, send: Sender) -> None:
        self.loop = asyncio.get_running_loop()
        self.send = send
        self.urgent: list[Call] = []
        self.later: list[Call] = []
        self.out = 0
        self._drains: set[asyncio.Future[None]] = set()

    async def run(self, call: Call, *, urgent: bool = False) -> Any:
        (self.urgent if urgent else self.later).append(call)
        if self.out < AT_ONCE:
            self.out += 1
            drain = asyncio.ensure_future(self._drain())
            self._drains.add(drain)
            drain.add_done_callback(self._drains.discard)
        return await call.result

    async def _drain(self) -> None:
        try:
            while self.urgent or self.later:
                batch = self.urgent[:SIZE]
                del self.urgent[:SIZE]
                room = SIZE - len(batch)
                batch += self.later[:room]
                del self.later[:room]
                batch = [call for call in batch if not call.result.cancelled()]  # callers gone
                if batch:
                    await self._send(sorted(batch, key=lambda call: call.order))
        finally:
            self.out -= 1

    async def _send(self, batch: list[Call]) -> None:
        try:
            outcomes = await self.send(batch)
        except Exception as exc:  # the whole batch failed: each caller hears why
            outcomes = [exc] * len(batch)
        except BaseException:  # this loop is closing: nobody is left waiting
            for call in batch:
                call.result.cancel()
            raise
        for call, outcome in zip(batch, outcomes, strict=True):
            _deliver(call, outcome)


def _deliver(call: Call, outcome: Any) -> None:
    failed = isinstance(outcome, Exception)
    if not call.result.cancelled():
        if failed:
            call.result.set_exception(outcome)
        else:
            call.result.set_result(outcome)
    elif call.orphaned is not None and not failed:
        call.orphaned(outcome)


_batchers: dict[tuple[int, str], Batcher] = {}


def batcher(name: str, send: Sender) -> Batcher:
    """This event loop's batcher called `name`."""
    loop = asyncio.get_running_loop()
    key = (id(loop), name)
    found = _batchers.get(key)
    if found is None or found.loop is not loop:  # a new loop where an old one was
        found = _batchers[key] = Batcher(send)
    return found


def forget(name: str) -> None:
    """Drop this event loop's batcher `name` (with the pool it sends on)."""
    _batchers.pop((id(asyncio.get_running_loop()), name), None)
