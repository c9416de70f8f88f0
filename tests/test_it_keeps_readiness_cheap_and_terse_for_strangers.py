"""/health/ready is public, so it is cheap and says little: one run of the checks
answers every caller of the process for a few seconds (callers at once share it), a
caller from elsewhere gets only the status (200/503), and the component names and
timings go to this machine or to whoever holds the metrics token."""

import threading

import pytest

from core import health
from engine.testing import run_engine
from tests.support import free_port

pytestmark = pytest.mark.django_db

FAR = {"REMOTE_ADDR": "203.0.113.9"}


@pytest.fixture
def counted(monkeypatch):
    runs = []
    real = health.run_checks

    def run():
        runs.append(1)
        return real()

    monkeypatch.setattr(health, "run_checks", run)
    monkeypatch.setattr(health, "_last", None)
    return runs


def test_it_tells_a_stranger_only_the_status(client, settings, counted):
    settings.WEFT_BACKEND_URL = f"http://127.0.0.1:{free_port()}/v1"
    response = client.get("/health/ready", **FAR)
    assert response.status_code == 503 and response.json() == {"status": "down"}
    near = client.get("/health/ready").json()  # this machine: the detail
    assert near["down"] == ["backend"] and "ms" in near["checks"]["database"]
    settings.WEFT_METRICS_TOKEN = "t0ken"
    assert set(client.get("/health/ready").json()) == {"status"}  # a token set: it decides
    told = client.get("/health/ready", headers={"Authorization": "Bearer t0ken"}, **FAR)
    assert told.json()["down"] == ["backend"]


def test_it_runs_the_checks_once_for_many_callers(client, settings, counted):
    with run_engine(backend="scripted") as base:
        settings.WEFT_BACKEND_URL = f"{base}/v1"
        answers = [client.get("/health/ready", **FAR).status_code for _ in range(20)]
        assert answers == [200] * 20 and len(counted) == 1
        codes: list[int] = []
        callers = [threading.Thread(target=lambda: codes.append(len(health.cached_checks())))
                   for _ in range(8)]  # fmt: skip
        for c in callers:
            c.start()
        for c in callers:
            c.join()
        assert len(counted) == 1 and codes == [4] * 8
        health._last = (health._last[0], health._last[1] - health.UP_SECONDS, health._last[2])
        assert client.get("/health/ready", **FAR).status_code == 200
        assert len(counted) == 2  # stale: asked again


def test_it_keeps_a_down_answer_shorter(settings, counted):
    settings.WEFT_BACKEND_URL = f"http://127.0.0.1:{free_port()}/v1"
    health.cached_checks()
    health.cached_checks()
    assert len(counted) == 1
    health._last = (health._last[0], health._last[1] - health.DOWN_SECONDS, health._last[2])
    health.cached_checks()
    assert len(counted) == 2
