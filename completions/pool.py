"""A keep-alive connection pool for the door's async client that costs O(1) per request.

httpcore 1.0's AsyncConnectionPool re-examines every connection it holds (and, for an
idle one, every other connection again) each time a request starts or a response
closes: with the /v1 proxy's 64 concurrent streams that bookkeeping was about 40% of
the web process' CPU. This pool keeps the idle HTTP/1.1 connections of each origin on
a stack instead: a request takes the most recently used one that is still good, or
opens a new one; its response, once closed, puts the connection back. It is built only
from httpcore's public pieces (AsyncHTTPConnection, its state queries, its network
backend interface), and httpx still does the request conversion and maps httpcore's
errors to httpx's.

The connections' bytes go through a plain asyncio protocol (AsyncioBackend below)
rather than anyio: anyio opens a cancel scope and yields to the event loop once more
on every read and write, which for a streamed answer is every token.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpcore
import httpx


class FlatPool:
    """What httpx's transport needs of a pool: handle_async_request and closing."""

    def __init__(
        self,
        *,
        max_connections: int,
        max_keepalive: int,
        keepalive_expiry: float,
        ssl_context: ssl.SSLContext | None = None,
    ):
        self.max_connections = max_connections
        self.max_keepalive = max_keepalive
        self.keepalive_expiry = keepalive_expiry
        self.idle: dict[tuple[bytes, bytes, int], list[httpcore.AsyncHTTPConnection]] = {}
        self.open = 0  # connections made and not yet discarded, idle ones included
        self.waiting: deque[asyncio.Future[None]] = deque()  # requests waiting for room
        self.ssl_context = ssl_context
        self.backend = AsyncioBackend()

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
        """An idle connection to this origin, else a new one if there is room (an idle
        connection elsewhere is closed to make it), else wait for one to come back."""
        timeout = request.extensions.get("timeout", {}).get("pool")
        try:
            async with asyncio.timeout(timeout):
                while True:
                    idle = self.idle.get(_key(origin))
                    while idle:
                        conn = idle.pop()
                        if conn.is_available() and not conn.has_expired():
                            return conn
                        await self._discard(conn)
                    if self.open >= self.max_connections:
                        other = next((conns for conns in self.idle.values() if conns), None)
                        if other is not None:
                            await self._discard(other.pop())
                    if self.open < self.max_connections:
                        self.open += 1
                        return httpcore.AsyncHTTPConnection(
                            origin=origin,
                            ssl_context=self.ssl_context,
                            keepalive_expiry=self.keepalive_expiry,
                            network_backend=self.backend,
                        )
                    turn = asyncio.get_running_loop().create_future()
                    self.waiting.append(turn)
                    try:
                        await turn
                    except BaseException:
                        if turn.done() and not turn.cancelled():
                            self._wake_one()  # woken, but leaving: the next one's turn
                        raise
                    finally:
                        with contextlib.suppress(ValueError):
                            self.waiting.remove(turn)
        except TimeoutError:
            raise httpcore.PoolTimeout("no free connection in the pool") from None

    def _wake_one(self) -> None:
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return

    async def _discard(self, conn: httpcore.AsyncHTTPConnection) -> None:
        self.open -= 1
        self._wake_one()
        with contextlib.suppress(Exception):
            await asyncio.shield(conn.aclose())

    async def _put_back(self, conn: httpcore.AsyncHTTPConnection, origin: httpcore.Origin) -> None:
        idle = self.idle.setdefault(_key(origin), [])
        if conn.is_idle() and len(idle) < self.max_keepalive:
            idle.append(conn)
            self._wake_one()
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
        # httpx's transport only calls handle_async_request / aclose / __aenter__ /
        # __aexit__ on its pool: FlatPool has them all.
        self._pool = FlatPool(  # type: ignore[assignment]
            max_connections=limits.max_connections or 1_000_000,
            max_keepalive=limits.max_keepalive_connections or 1_000_000,
            keepalive_expiry=limits.keepalive_expiry or 5.0,
            ssl_context=httpx.create_ssl_context(),  # what httpx's own pool would use
        )


# --- the connections' bytes, on asyncio itself ----------------------------------------------

READ_HIGH = 1 << 20  # buffered bytes past which the socket is no longer read, for now
READ_LOW = 1 << 18
WRITE_HOLD = 1 << 16  # bytes a write may wait for the next, to go out in one send


class _Link(asyncio.Protocol):
    """One connection's received bytes and state, as the event loop reports them."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.buffer = bytearray()
        self.eof = False
        self.lost: Exception | None = None
        self.reading_paused = False
        self.writing_paused = False
        self.waiter: asyncio.Future[None] | None = None  # a read waiting for bytes
        self.drained: asyncio.Future[None] | None = None  # a write waiting for room
        self.outgoing: list[bytes] = []  # written, not yet handed to the transport
        self.outgoing_bytes = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > READ_HIGH and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.lost = exc
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def flush(self) -> None:
        if self.outgoing:
            data = b"".join(self.outgoing)
            self.outgoing.clear()
            self.outgoing_bytes = 0
            if not self.transport.is_closing():
                self.transport.write(data)

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, link: _Link) -> None:
        self.link = link

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        link = self.link
        link.flush()  # the request is complete once its answer is read
        if not link.buffer and not link.eof:
            link.waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await link.waiter
            except TimeoutError:
                raise httpcore.ReadTimeout("the backend sent nothing in time") from None
            finally:
                link.waiter = None
        if link.buffer:
            if len(link.buffer) <= max_bytes:
                data = bytes(link.buffer)
                link.buffer.clear()
            else:
                data = bytes(link.buffer[:max_bytes])
                del link.buffer[:max_bytes]
            if link.reading_paused and len(link.buffer) < READ_LOW:
                link.reading_paused = False
                link.transport.resume_reading()
            return data
        if link.lost is not None:
            raise httpcore.ReadError(str(link.lost) or type(link.lost).__name__)
        return b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        link = self.link
        if not buffer:
            return
        if link.lost is not None or link.transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        # A request's head and its body are two writes: held until the next turn of the
        # event loop (or the first read), they leave in one send: one wake-up of the
        # backend, not two (on two shared cores each wake-up can cost this process its
        # turn on the CPU).
        link.outgoing.append(buffer)
        link.outgoing_bytes += len(buffer)
        if link.outgoing_bytes < WRITE_HOLD:
            if len(link.outgoing) == 1:
                asyncio.get_running_loop().call_soon(link.flush)
            return
        link.flush()
        if link.writing_paused:
            link.drained = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await link.drained
            except TimeoutError:
                raise httpcore.WriteTimeout("the backend took nothing in time") from None
            finally:
                link.drained = None
            if link.lost is not None:
                raise httpcore.WriteError(str(link.lost) or type(link.lost).__name__)

    async def aclose(self) -> None:
        self.link.flush()
        self.link.transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self.link.transport, self.link, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError:
            await self.aclose()
            raise httpcore.ConnectTimeout("the TLS handshake took too long") from None
        except (OSError, ssl.SSLError) as exc:
            await self.aclose()
            raise httpcore.ConnectError(str(exc)) from None
        self.link.transport = transport
        return self

    def get_extra_info(self, info: str) -> Any:
        link = self.link
        if info == "is_readable":
            # An idle HTTP/1.1 connection with bytes or an EOF waiting: the server closed it.
            return bool(link.buffer) or link.eof
        name = {"client_addr": "sockname", "server_addr": "peername"}.get(info, info)
        return link.transport.get_extra_info(name)


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, link = await loop.create_connection(
                    _Link, host, port, local_addr=(local_address, 0) if local_address else None
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection to {host}:{port} in time") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from None
        sock = link.transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AsyncioStream(link)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
