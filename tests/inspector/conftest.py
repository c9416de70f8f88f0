"""Engines, an in-process pointer at them, and a real ASGI server for the browser test."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import httpx
import pytest

from engine.testing import run_engine
from tests.support import Supervisor, child_env, free_port, start_web


@pytest.fixture(scope="session")
def scripted_engine() -> Iterator[str]:
    with run_engine("scripted") as url:
        yield url


@pytest.fixture(scope="session")
def llama_engine() -> Iterator[str]:
    pytest.importorskip("llama_cpp")
    # Two threads: the machine is shared, and SmolLM2-135M needs no more.
    with run_engine("llama", n_threads=2, startup_timeout=120) as url:
        yield url


def _point_at(settings, base: str) -> str:
    settings.WEFT_BACKEND_URL = f"{base}/v1"
    return base


@pytest.fixture
def scripted(settings, scripted_engine) -> Iterator[str]:
    """Django in this process talks to the scripted engine, whose request log starts empty."""
    httpx.delete(f"{scripted_engine}/_scripted/requests")
    yield _point_at(settings, scripted_engine)


@pytest.fixture
def llama(settings, llama_engine) -> str:
    return _point_at(settings, llama_engine)


def received(base: str, path: str = "/v1/completions") -> list[dict]:
    """What the scripted engine received on `path`."""
    got = httpx.get(f"{base}/_scripted/requests").json()["requests"]
    return [r for r in got if r["path"] == path]


_CHIP = re.compile(
    r'<span class="tok [^"]*"[^>]*? data-pos="(\d+)" data-id="(\d*)" data-logprob="([^"]*)"'
)


def chips(html: str) -> list[tuple[int, int | None, float | None]]:
    """(position, id, logprob) of every token chip on a result page."""
    return [
        (int(pos), int(tid) if tid else None, float(unescape(lp)) if lp else None)
        for pos, tid, lp in _CHIP.findall(html)
    ]


@pytest.fixture(scope="session")
def inspect_web(django_db_setup, llama_engine) -> Iterator[str]:
    """The real ASGI server on the test database, pointed at the real model. Inspect
    runs synchronously in the request (run_now), so no worker is needed."""
    from django.conf import settings

    env = child_env(settings.DATABASES["default"]["NAME"], WEFT_BACKEND_URL=f"{llama_engine}/v1")
    sup = Supervisor()
    try:
        yield start_web(sup, env, free_port())
    finally:
        sup.stop_all()


@pytest.fixture(scope="session")
def scripted_web(django_db_setup, scripted_engine) -> Iterator[str]:
    """The real ASGI server on the test database, pointed at the scripted engine (fast,
    deterministic; its small vocabulary makes full-vocabulary scorings cheap)."""
    from django.conf import settings

    env = child_env(settings.DATABASES["default"]["NAME"], WEFT_BACKEND_URL=f"{scripted_engine}/v1")
    sup = Supervisor()
    try:
        yield start_web(sup, env, free_port())
    finally:
        sup.stop_all()
