"""Fixtures for the Workbench: the scripted engine, and the real ASGI server plus a
Celery worker pointed at it (and, for one test, at the real model)."""

import contextlib

import httpx
import pytest

from engine.testing import run_engine
from tests.support import Supervisor, child_env, free_port, start_web, start_worker


@pytest.fixture(scope="session")
def scripted_engine():
    with run_engine("scripted", max_logprobs=20) as url:
        yield url


@contextlib.contextmanager
def weft_stack(engine_url: str, logs, **env_extra: str):
    """uvicorn + a Celery worker on the test database, talking to `engine_url`."""
    from django.conf import settings

    env = child_env(
        settings.DATABASES["default"]["NAME"],
        WEFT_BACKEND_URL=f"{engine_url}/v1",
        WEFT_GENERATION_QUEUE=f"workbench-{free_port()}",
        **env_extra,
    )
    sup = Supervisor()
    try:
        url = start_web(sup, env, free_port())
        start_worker(sup, env, logs / "worker.log")
        yield url
    finally:
        sup.stop_all()


@pytest.fixture(scope="session")
def wb_stack(django_db_setup, scripted_engine, tmp_path_factory):
    # A short retry cap so a long Retry-After is reported rather than slept through.
    with weft_stack(
        scripted_engine, tmp_path_factory.mktemp("wb-stack"), WEFT_BACKEND_MAX_RETRY_WAIT="3"
    ) as url:
        yield {"url": url, "engine": scripted_engine}


@pytest.fixture
def engine(scripted_engine, settings):
    """The scripted engine, emptied of queued faults and recorded requests; this test
    process's own door calls (model list, token counts) go to it too."""
    settings.WEFT_BACKEND_URL = f"{scripted_engine}/v1"
    httpx.delete(f"{scripted_engine}/_scripted/faults", timeout=5)
    httpx.delete(f"{scripted_engine}/_scripted/requests", timeout=5)
    return ScriptedEngine(scripted_engine)


class ScriptedEngine:
    def __init__(self, url: str) -> None:
        self.url = url

    def fault(self, *faults: dict) -> None:
        response = httpx.post(f"{self.url}/_scripted/faults", json={"faults": list(faults)})
        response.raise_for_status()

    def completion_requests(self) -> list[dict]:
        body = httpx.get(f"{self.url}/_scripted/requests", timeout=5).json()
        return [r for r in body["requests"] if r["path"] == "/v1/completions"]


@pytest.fixture(scope="session")
def llama_stack(django_db_setup, tmp_path_factory):
    """The stack on the real model (SmolLM2 via llama.cpp), started once for the tests
    that need it. A small per-token delay so the stream is visible before the result
    replaces it."""
    with run_engine("llama", max_logprobs=20, token_delay=0.03, startup_timeout=120) as engine_url:
        with weft_stack(engine_url, tmp_path_factory.mktemp("llama-stack")) as url:
            yield url
