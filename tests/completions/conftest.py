"""Fixtures for the completions door: the engine's scripted backend over real HTTP,
and Weft processes pointed at it."""

import httpx
import pytest

from completions.client import forget_backend_cache
from engine.testing import run_engine
from tests.support import Supervisor, child_env, free_port, start_web, start_worker


@pytest.fixture(scope="session")
def scripted_engine():
    with run_engine(backend="scripted") as base:
        yield base


class Scripted:
    """The scripted backend: queue faults, read back what it received."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.api = f"{base}/v1"

    def faults(self, *faults: dict) -> None:
        httpx.post(
            f"{self.base}/_scripted/faults", json={"faults": list(faults)}
        ).raise_for_status()

    def requests(self, path: str = "/v1/completions") -> list[dict]:
        got = httpx.get(f"{self.base}/_scripted/requests").json()["requests"]
        return [r for r in got if r["path"] == path]

    def reset(self) -> None:
        httpx.delete(f"{self.base}/_scripted/faults").raise_for_status()
        httpx.delete(f"{self.base}/_scripted/requests").raise_for_status()


@pytest.fixture
def scripted(scripted_engine, settings):
    """Points this test process's settings at the scripted backend, with fast retries."""
    settings.WEFT_BACKEND_URL = f"{scripted_engine}/v1"
    settings.WEFT_BACKEND_MAX_RETRY_WAIT = 5.0
    settings.WEFT_BACKEND_READ_TIMEOUT = 10.0
    backend = Scripted(scripted_engine)
    backend.reset()
    forget_backend_cache()
    yield backend
    backend.reset()


@pytest.fixture
def door_queue(settings):
    """Generations started by this test go to the door_stack worker's queue."""
    settings.WEFT_GENERATION_QUEUE = "door"
    return "door"


@pytest.fixture(scope="session")
def door_env(django_db_setup, scripted_engine):
    from django.conf import settings

    return child_env(
        settings.DATABASES["default"]["NAME"],
        WEFT_BACKEND_URL=f"{scripted_engine}/v1",
        WEFT_CHECKPOINT_INTERVAL_SECONDS="0.25",
        WEFT_GENERATION_QUEUE="door",
    )


@pytest.fixture(scope="session")
def door_stack(door_env, scripted_engine, tmp_path_factory):
    """The real ASGI server and a real Celery worker on the test database and Redis,
    talking to the scripted engine. Tests need django_db(transaction=True)."""
    sup = Supervisor()
    logs = tmp_path_factory.mktemp("door")
    try:
        url = start_web(sup, door_env, free_port())
        start_worker(sup, door_env, logs / "worker.log")
        yield {
            "url": url,
            "env": door_env,
            "engine": scripted_engine,
            "logs": logs,
            "supervisor": sup,
        }
    finally:
        sup.stop_all()


@pytest.fixture
def unconsumed_queue(settings):
    """Tests that run the pipeline in this process: the on-commit Celery message goes
    to a queue no worker reads, so no other worker runs the same generation."""
    settings.WEFT_GENERATION_QUEUE = "completions-tests-unconsumed"


@pytest.fixture
def budget_of(settings):
    from completions.models import TokenBudget

    def set_budget(user, tokens: int):
        TokenBudget.objects.update_or_create(user=user, defaults={"monthly_tokens": tokens})

    return set_budget
