import asyncio

import pytest

from completions.client import AsyncBackendClient
from completions.errors import RateLimited
from completions.schema import validate_params

pytestmark = pytest.mark.django_db


def test_it_streams_and_retries_asynchronously(scripted):
    scripted.faults({"status": 429, "code": "rate_limited", "retry_after": 0})
    params = validate_params(
        {"model": "scripted", "prompt": "Hi", "max_tokens": 4, "stream": True, "n": 2}
    )

    async def run():
        async with AsyncBackendClient() as client, client.stream(params) as chunks:
            return [
                (c["index"], c["text"])
                for chunk in [x async for x in chunks]
                for c in chunk["choices"]
            ]

    got = asyncio.run(run())
    assert sorted({i for i, _ in got}) == [0, 1]
    assert len(got) == 8
    assert len(scripted.requests()) == 2


def test_it_raises_typed_errors_asynchronously(scripted):
    scripted.faults({"status": 429, "code": "rate_limited", "retry_after": 0})
    params = validate_params({"model": "scripted", "prompt": "Hi", "max_tokens": 4})

    async def run():
        async with AsyncBackendClient(max_retries=0) as client:
            await client.complete(params)

    with pytest.raises(RateLimited):
        asyncio.run(run())
