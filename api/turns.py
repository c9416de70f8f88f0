"""Oldest first: the order in which a burst of /v1 requests is set up.

Setting a request up takes two round trips to local servers (its place among the key's
active requests in Redis, its reservation in Postgres), each a moment of CPU here and
there. When a burst arrives together and every request takes those steps at once, they
interleave: each request waits for everyone's steps, and the first of a burst reaches
the backend about when the last does (measured, 64 streams at once: the first request
sent upstream ~40 ms after it arrived, all 64 within the next 20 ms). Here at most
AT_ONCE requests are inside a setup step at a time, and a freed turn goes to the
request that arrived first, so a burst reaches the backend in arrival order and the
first requests without waiting for the last. The work done is the same.

A turn covers only those local, bounded steps, never a call to a backend or a wait in
the key's queue: a backend that hangs, or a key at its limit, holds up nobody else.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator

AT_ONCE = 8  # enough to keep both servers busy; few enough that the oldest go first


class OldestFirst:
    """A semaphore whose waiters are served by age (their request's arrival), not by
    when they started waiting: a request on its second step goes before the ones still
    waiting for their first."""

    def __init__(self, size: int) -> None:
        self.free = size
        self.waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()  # ties: first come

    @contextlib.asynccontextmanager
    async def turn(self, arrived: float) -> AsyncIterator[None]:
        if self.free > 0 and not self.waiting:
            self.free -= 1
        else:
            given = asyncio.get_running_loop().create_future()
            heapq.heappush(self.waiting, (arrived, next(self._order), given))
            try:
                await given
            except asyncio.CancelledError:
                if given.done() and not given.cancelled():
                    self._pass_on()  # handed the turn just as it was cancelled
                else:
                    given.cancel()  # skipped when its place comes up
                raise
        try:
            yield
        finally:
            self._pass_on()

    def _pass_on(self) -> None:
        while self.waiting:
            given = heapq.heappop(self.waiting)[2]
            if not given.done():
                given.set_result(None)
                return
        self.free += 1


_gates: dict[int, OldestFirst] = {}


def turn(arrived: float) -> contextlib.AbstractAsyncContextManager[None]:
    """A setup step's turn on this event loop, for a request that arrived at `arrived`
    (time.perf_counter())."""
    loop = id(asyncio.get_running_loop())
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = OldestFirst(AT_ONCE)
    return gate.turn(arrived)


def forget() -> None:
    """Drop this event loop's turns (with its other pools, for a loop that ends)."""
    _gates.pop(id(asyncio.get_running_loop()), None)
