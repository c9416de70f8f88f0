"""A backend's name defaults to its hostname (WEFT_BACKENDS without "name"), and a
connection error's text holds the host and port it tried. When a model's backend is
down, API clients and pages are told "backend unavailable" with the model's short id
only; the log keeps which backend it was."""

import asyncio
import json
import logging

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from api.asgi import V1Router
from api.models import ApiKey
from api.proxy import close_connections
from completions.client import BackendClient, forget_backend_cache, get_model
from completions.errors import BackendUnavailable
from completions.passthrough import Target, close_client, forget_targets, open_completion
from completions.schema import ModelInfo, validate_params
from config.env import env_backends
from tests.support import free_port

pytestmark = pytest.mark.django_db(transaction=True)

HOST = "localhost"  # the default name of an unnamed backend at http://localhost:…


@pytest.fixture
def down_backend(settings, monkeypatch, scripted):
    """Two backends as an operator writes them: an unnamed one at localhost (down: its
    name is its hostname) serving "big", and the scripted engine serving "tiny"."""
    port = free_port()
    monkeypatch.setenv(
        "WEFT_BACKENDS",
        json.dumps(
            [
                {"url": f"http://{HOST}:{port}/v1", "models": {"big": "big"}},
                {"name": "scripted", "url": f"{scripted.base}/v1", "models": {"tiny": "scripted"}},
            ]
        ),
    )
    settings.WEFT_BACKENDS = env_backends("WEFT_BACKENDS")
    assert settings.WEFT_BACKENDS[0]["name"] == HOST
    forget_backend_cache()
    forget_targets()
    yield port
    forget_backend_cache()
    forget_targets()


def v1_completion(secret: str, model: str) -> httpx.Response:
    """POST /v1/completions to the /v1 ASGI app in this process (no server)."""

    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=V1Router(django_app=None))
        async with httpx.AsyncClient(transport=transport, base_url="http://weft") as client:
            answer = await client.post(
                "/v1/completions",
                json={"model": model, "prompt": "Hi", "max_tokens": 2},
                headers={"Authorization": f"Bearer {secret}"},
            )
            await asyncio.sleep(0.2)  # the request's row is written after the answer
        await close_connections()
        await sync_to_async(connections.close_all)()
        return answer

    return asyncio.run(run())


def logged(caplog) -> str:
    return "\n".join(record.getMessage() for record in caplog.records)


def test_it_names_only_the_model_when_its_backend_is_down(down_backend, make_user, caplog):
    caplog.set_level(logging.WARNING)
    with pytest.raises(BackendUnavailable) as caught:
        get_model("big")  # what every page asks before it starts a run
    assert caught.value.status == 503
    assert caught.value.message == "backend unavailable for model 'big'"

    _, secret = ApiKey.objects.create_key(make_user(), "down")
    answer = v1_completion(secret, "big")
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "upstream_unavailable" and "backend unavailable" in error["message"]
    assert "'big'" in error["message"]
    assert HOST not in answer.text and str(down_backend) not in answer.text
    # The operator still learns which backend it was.
    assert HOST in logged(caplog)


def test_it_hides_the_address_a_connection_failed_on(scripted, settings, caplog):
    """One backend, no listing asked (requests go out unchanged): the connection itself
    fails, on the page's client and on the /v1 proxy's pool."""
    caplog.set_level(logging.WARNING)
    port = free_port()
    settings.WEFT_BACKEND_URL = f"http://{HOST}:{port}/v1"
    settings.WEFT_BACKEND_MAX_RETRY_WAIT = 0.0
    forget_backend_cache()
    forget_targets()
    params = validate_params({"model": "scripted", "prompt": "Hi", "max_tokens": 2})
    with BackendClient() as client, pytest.raises(BackendUnavailable) as caught:
        client.complete(params)
    assert "backend unavailable" in caught.value.message
    assert HOST not in caught.value.message and str(port) not in caught.value.message

    # The /v1 proxy's own pool (asyncio's error names the address it tried).
    target = Target(ModelInfo(id="scripted"), settings.WEFT_BACKEND_URL, "", None, HOST)

    async def send() -> BackendUnavailable:
        try:
            await open_completion(target, {"model": "scripted", "prompt": "Hi", "max_tokens": 2})
        except BackendUnavailable as exc:
            return exc
        finally:
            await close_client()
        raise AssertionError("the connection did not fail")

    refused = asyncio.run(send())
    assert "backend unavailable" in refused.message
    assert str(port) not in refused.message and "127.0.0.1" not in refused.message
    assert f"{HOST}:{port}" in logged(caplog)
