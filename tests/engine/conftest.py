"""Engines started once per session over real HTTP (see engine.testing.run_engine)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from engine.testing import run_engine


@pytest.fixture(scope="session")
def scripted_url() -> Iterator[str]:
    with run_engine("scripted") as url:
        yield url


@pytest.fixture(scope="session")
def llama_url() -> Iterator[str]:
    pytest.importorskip("llama_cpp")
    with run_engine("llama") as url:
        yield url


@pytest.fixture(scope="session", params=["scripted", pytest.param("llama", marks=pytest.mark.slow)])
def engine_url(request: pytest.FixtureRequest) -> str:
    """The same checks run against both model backends."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def client(engine_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=engine_url, timeout=60) as c:
        yield c


@pytest.fixture
def scripted(scripted_url: str) -> Iterator[httpx.Client]:
    """A client of the shared scripted engine with an empty fault queue and request log."""
    with httpx.Client(base_url=scripted_url, timeout=30) as c:
        c.delete("/_scripted/faults")
        c.delete("/_scripted/requests")
        yield c
        c.delete("/_scripted/faults")
