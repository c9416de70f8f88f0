"""GET /health is liveness (the process answers; nothing else is asked), GET
/health/ready readiness (503 naming what is down: Postgres, Redis, or every backend)."""

import re

import pytest

from engine.testing import run_engine
from tests.support import free_port

pytestmark = pytest.mark.django_db

REQUEST_ID = re.compile(r"^req-[0-9a-f]{32}$")


def test_it_reports_every_service_up(client, settings):
    with run_engine(backend="scripted") as base:
        settings.WEFT_BACKEND_URL = f"{base}/v1"
        response = client.get("/health/ready")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "broker", "channel_layer", "backend"}
    assert all(check["ok"] for check in body["checks"].values())


def test_it_names_what_is_down(client, settings):
    settings.WEFT_BACKEND_URL = f"http://127.0.0.1:{free_port()}/v1"
    response = client.get("/health/ready")
    body = response.json()
    assert response.status_code == 503
    assert body["down"] == ["backend"]
    assert body["checks"]["database"]["ok"] is True


def test_it_stays_alive_while_a_backend_is_down(client, settings):
    settings.WEFT_BACKEND_URL = f"http://127.0.0.1:{free_port()}/v1"
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_it_needs_no_login(client):
    assert client.get("/health").status_code == 200
    assert client.get("/health/ready").status_code in (200, 503)


def test_it_gives_both_a_request_id(client):
    """The seed: X-Request-Id is on every response, /health included (its spec covers
    /v1/* plus /health); here every page's answer carries one, each its own."""
    ids = [client.get(path).headers.get("X-Request-Id") for path in ("/health", "/health",
                                                                    "/health/ready", "/login/")]  # fmt: skip
    assert all(REQUEST_ID.match(i or "") for i in ids), ids
    assert len(set(ids)) == len(ids)
