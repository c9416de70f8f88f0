"""The door's connection pool (completions/pool.py), against a real scripted engine:
requests reuse one keep-alive connection, a stream abandoned mid-way or a timed-out
request never hands its connection to the next one, a burst larger than the pool waits
for room instead of failing, and the backend's failures keep httpx's error types (the
door maps those to the seed's codes)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest

from completions.pool import FlatTransport
from engine.testing import run_engine

BODY = {"model": "scripted", "prompt": "The cat", "max_tokens": 3}


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with run_engine("scripted", token_delay=0.01) as url:
        yield url + "/v1/completions"


def client(max_connections: int = 8, read: float = 10) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=4)
    return httpx.AsyncClient(transport=FlatTransport(limits), timeout=httpx.Timeout(10, read=read))


def connections(c: httpx.AsyncClient) -> list:
    pool = c._transport._pool  # type: ignore[attr-defined]
    assert pool.open == sum(len(idle) for idle in pool.idle.values())  # none in use now
    return [conn for idle in pool.idle.values() for conn in idle]


def test_it_reuses_one_connection_for_requests_in_turn(engine: str) -> None:
    async def run() -> list[str]:
        async with client() as c:
            for _ in range(5):
                assert (await c.post(engine, json=BODY)).status_code == 200
            return [conn.info() for conn in connections(c)]

    (only,) = asyncio.run(run())
    assert "Request Count: 5" in only


def test_it_never_reuses_a_connection_left_mid_stream_or_timed_out(engine: str) -> None:
    async def run() -> list[str]:
        async with client(read=0.3) as c:
            async with c.stream(
                "POST", engine, json={**BODY, "max_tokens": 50, "stream": True}
            ) as r:
                async for _ in r.aiter_raw():
                    break  # leave with the rest of the answer unread
            assert connections(c) == []
            slow = {"x-scripted-fault": json.dumps({"first_byte_delay": 2})}
            with pytest.raises(httpx.ReadTimeout):
                await c.post(engine, json=BODY, headers=slow)
            assert connections(c) == []
            assert (await c.post(engine, json=BODY)).status_code == 200
            return [conn.info() for conn in connections(c)]

    (fresh,) = asyncio.run(run())
    assert "Request Count: 1" in fresh


def test_it_queues_a_burst_larger_than_the_pool(engine: str) -> None:
    async def run() -> tuple[list[int], int]:
        async with client(max_connections=3) as c:
            streams = [{**BODY, "stream": True, "max_tokens": 5}] * 12
            answers = await asyncio.gather(*[c.post(engine, json=b) for b in [BODY] * 12 + streams])
            return [a.status_code for a in answers], len(connections(c))

    statuses, kept = asyncio.run(run())
    assert statuses == [200] * 24
    assert kept <= 3


def test_it_reports_an_unreachable_backend_as_httpx_does() -> None:
    async def run() -> None:
        async with client() as c:
            await c.post("http://127.0.0.1:9/v1/completions", json=BODY)

    with pytest.raises(httpx.ConnectError):
        asyncio.run(run())
