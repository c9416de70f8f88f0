"""Fixtures for the Batch page: the scripted engine (a real HTTP server), and the
real ASGI server plus a Celery worker pointed at it on their own queue."""

import httpx
import pytest

from completions.client import forget_backend_cache
from engine.testing import run_engine
from tests.support import Supervisor, child_env, free_port, start_web, start_worker

QUEUE = "batch-tests"


@pytest.fixture(scope="session")
def batch_engine():
    with run_engine("scripted", max_logprobs=20) as url:
        yield url


@pytest.fixture
def engine(batch_engine, settings):
    """This process's door talks to the scripted engine too (models, token counts);
    generations it starts go to the batch stack's queue."""
    settings.WEFT_BACKEND_URL = f"{batch_engine}/v1"
    settings.WEFT_GENERATION_QUEUE = QUEUE
    httpx.delete(f"{batch_engine}/_scripted/faults", timeout=5)
    httpx.delete(f"{batch_engine}/_scripted/requests", timeout=5)
    forget_backend_cache()
    return Engine(batch_engine)


class Engine:
    def __init__(self, url: str) -> None:
        self.url = url

    def fault(self, *faults: dict) -> None:
        httpx.post(f"{self.url}/_scripted/faults", json={"faults": list(faults)}).raise_for_status()

    def completions(self) -> list[dict]:
        got = httpx.get(f"{self.url}/_scripted/requests", timeout=5).json()["requests"]
        return [r for r in got if r["path"] == "/v1/completions"]


@pytest.fixture(scope="session")
def batch_stack(django_db_setup, batch_engine, tmp_path_factory):
    """uvicorn + a Celery worker (4 threads) on the test database; batches feed at
    most 2 generations at once so the bound is visible."""
    from django.conf import settings

    env = child_env(
        settings.DATABASES["default"]["NAME"],
        WEFT_BACKEND_URL=f"{batch_engine}/v1",
        WEFT_GENERATION_QUEUE=QUEUE,
        WEFT_BATCH_CONCURRENCY="2",
        WEFT_CHECKPOINT_INTERVAL_SECONDS="0.25",
    )
    sup = Supervisor()
    logs = tmp_path_factory.mktemp("batch-stack")
    try:
        url = start_web(sup, env, free_port())
        start_worker(sup, env, logs / "worker.log")
        yield {"url": url, "env": env, "logs": logs, "supervisor": sup}
    finally:
        sup.stop_all()


def upload(client, content: bytes | str, name: str = "prompts.jsonl", **fields):
    """POST the upload form as the page does."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    if isinstance(content, str):
        content = content.encode()
    data = {"model": "scripted", "n": "1", "max_tokens": "8", "format": "auto", **fields}
    data["file"] = SimpleUploadedFile(name, content)
    return client.post("/batch/new/", data)
