import pytest

from engine.testing import run_engine
from tests.support import free_port

pytestmark = pytest.mark.django_db


def test_it_reports_every_service_up(client, settings):
    with run_engine(backend="scripted") as base:
        settings.WEFT_BACKEND_URL = f"{base}/v1"
        response = client.get("/health")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "broker", "channel_layer", "backend"}
    assert all(check["ok"] for check in body["checks"].values())


def test_it_names_what_is_down(client, settings):
    settings.WEFT_BACKEND_URL = f"http://127.0.0.1:{free_port()}/v1"
    response = client.get("/health")
    body = response.json()
    assert response.status_code == 503
    assert body["down"] == ["backend"]
    assert body["checks"]["database"]["ok"] is True


def test_it_needs_no_login(client):
    assert client.get("/health").status_code in (200, 503)
