"""A keep-alive connection pool for the door's async client that costs O(1) per request.

httpcore 1.0's AsyncConnectionPool re-examines every connection it holds (and, for an
idle one, every other connection again) each time a request starts or a response
closes: with the /v1 proxy's 64 concurrent streams that bookkeeping was about 40% of
the web process' CPU. This pool keeps the idle HTTP/1.1 connections of each origin on
a stack instead: a request takes the most recently used one that is still good, or
opens a new one; its response, once closed, puts the connection back. It is built only
from httpcore's public pieces (AsyncHTTPConnection and its state queries), and httpx
still does the request conversion and maps httpcore's errors to httpx's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpcore
import httpx


class FlatPool:
    """What httpx's transport needs of a pool: handle_async_request and closing."""

    def __init__(self, *, max_connections: int, max_keepalive: int, keepalive_expiry: float):
        self.max_keepalive = max_keepalive
        self.keepalive_expiry = keepalive_expiry
        self.idle: dict[tuple[bytes, bytes, int], list[httpcore.AsyncHTTPConnection]] = {}
        self.room = asyncio.Semaphore(max_connections)  # one place per open connection
        self.backend = httpcore.AnyIOBackend()

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        origin = request.url.origin
        while True:
            conn = await self._take(origin, request)
            try:
                response = await conn.handle_async_request(request)
            except httpcore.ConnectionNotAvailable:
                await self._discard(conn)  # the server closed it meanwhile: another one
                continue
            except BaseException:
                await self._discard(conn)
                raise
            stream = _Stream(response.stream, conn, origin, self)
            return httpcore.Response(
                status=response.status,
                headers=response.headers,
                content=stream,
                extensions=response.extensions,
            )

    async def _take(
        self, origin: httpcore.Origin, request: httpcore.Request
    ) -> httpcore.AsyncHTTPConnection:
        idle = self.idle.get(_key(origin))
        while idle:
            conn = idle.pop()
            if conn.is_available() and not conn.has_expired():
                return conn
            await self._discard(conn)
        timeout = request.extensions.get("timeout", {}).get("pool")
        try:
            async with asyncio.timeout(timeout):
                await self.room.acquire()
        except TimeoutError:
            raise httpcore.PoolTimeout("no free connection in the pool") from None
        return httpcore.AsyncHTTPConnection(
            origin=origin, keepalive_expiry=self.keepalive_expiry, network_backend=self.backend
        )

    async def _discard(self, conn: httpcore.AsyncHTTPConnection) -> None:
        with contextlib.suppress(Exception):
            await asyncio.shield(conn.aclose())
        self.room.release()

    async def _put_back(self, conn: httpcore.AsyncHTTPConnection, origin: httpcore.Origin) -> None:
        idle = self.idle.setdefault(_key(origin), [])
        if conn.is_idle() and len(idle) < self.max_keepalive:
            idle.append(conn)
        else:
            await self._discard(conn)

    async def __aenter__(self) -> FlatPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        idle, self.idle = self.idle, {}
        for conns in idle.values():
            for conn in conns:
                await self._discard(conn)


def _key(origin: httpcore.Origin) -> tuple[bytes, bytes, int]:
    return (origin.scheme, origin.host, origin.port)  # Origin itself is not hashable


class _Stream:
    """A response body that hands its connection back to the pool when closed."""

    def __init__(
        self, stream, conn: httpcore.AsyncHTTPConnection, origin: httpcore.Origin, pool: FlatPool
    ) -> None:
        self.stream = stream
        self.conn = conn
        self.origin = origin
        self.pool = pool
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self.stream:
                yield part
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            # Shielded: a cancelled request must still leave its connection closed or idle.
            await asyncio.shield(self.stream.aclose())
        finally:
            await self.pool._put_back(self.conn, self.origin)


class FlatTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (request conversion, error mapping) over a FlatPool."""

    def __init__(self, limits: httpx.Limits) -> None:
        super().__init__(limits=limits)
        self._pool = FlatPool(
            max_connections=limits.max_connections or 1_000_000,
            max_keepalive=limits.max_keepalive_connections or 1_000_000,
            keepalive_expiry=limits.keepalive_expiry or 5.0,
        )
