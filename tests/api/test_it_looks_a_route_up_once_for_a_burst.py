"""A burst of /v1 requests that finds a short id's route missing makes one lookup of
it (one models listing from the backend), shared by all of them."""

import asyncio

import pytest

from completions import passthrough
from completions.client import forget_backend_cache
from config.env import env_backends
from tests.api.conftest import PROXY_BACKENDS, ProxyBackend

BURST = 20


@pytest.fixture
def scripted_routing(settings, monkeypatch, proxy_engine):
    monkeypatch.setenv("WEFT_BACKENDS", PROXY_BACKENDS.format(url=proxy_engine))
    settings.WEFT_BACKENDS = env_backends("WEFT_BACKENDS")
    settings.WEFT_DEFAULT_MODEL = "llama-8b"
    backend = ProxyBackend(proxy_engine)
    backend.reset()
    forget_backend_cache()
    passthrough.forget_targets()
    yield backend
    forget_backend_cache()
    passthrough.forget_targets()


def test_it_shares_one_lookup_among_a_burst(scripted_routing):
    async def burst():
        return await asyncio.gather(*[passthrough.target("llama-8b") for _ in range(BURST)])

    targets = asyncio.run(burst())
    assert {(t.model.id, t.upstream, t.backend) for t in targets} == {
        ("llama-8b", "scripted", "scripted-gpu0")
    }
    listings = scripted_routing.requests("/v1/models")
    assert len(listings) == 1, f"{len(listings)} listings for a burst of {BURST}"
