"""A backend URL with credentials in it never reaches a user or a log: /health/ready (public)
says what is down, not why; View code shows the URL without them; the client's log
lines and error messages strip them; a malformed URL's config error too."""

import logging

import pytest
from django.core.exceptions import ImproperlyConfigured

from completions.client import BackendClient, forget_backend_cache
from completions.errors import BackendError
from completions.schema import validate_params
from config.env import check_http_url, database_from_url, without_credentials
from engine.testing import run_engine
from tests.support import free_port

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-pw"


def test_it_strips_userinfo_and_secret_query_values():
    assert without_credentials("https://bob:s3cr3t-pw@api.example/v1") == "https://api.example/v1"
    assert (
        without_credentials("http://tok@h:1/v1?api_key=s3cr3t-pw&x=1")
        == "http://h:1/v1?api_key=***&x=1"
    )
    text = "ConnectError for url 'http://u:s3cr3t-pw@10.0.0.1:8000/health'"
    assert SECRET not in without_credentials(
        text
    ) and "10.0.0.1:8000/health" in without_credentials(text)


def test_it_says_what_is_down_not_why(client, settings, caplog):
    settings.WEFT_BACKEND_URL = f"http://admin:{SECRET}@127.0.0.1:{free_port()}/v1"
    with caplog.at_level(logging.WARNING):
        response = client.get("/health/ready")
    assert response.status_code == 503
    body = response.json()
    assert body["down"] == ["backend"] and body["checks"]["backend"] == {
        "ok": False,
        "ms": body["checks"]["backend"]["ms"],
    }
    assert SECRET not in response.content.decode()
    assert "backend is down" in caplog.text and SECRET not in caplog.text


def test_it_shows_code_and_logs_without_credentials(client, settings, make_user, caplog):
    with run_engine("scripted") as base:
        host = base.removeprefix("http://")
        settings.WEFT_BACKEND_URL = f"http://admin:{SECRET}@{host}/v1"
        settings.WEFT_BACKEND_MAX_RETRIES = 0
        forget_backend_cache()
        client.force_login(make_user())
        page = client.post("/workbench/code/", {"prompt": "Hi", "max_tokens": "4"})
        assert page.status_code == 200
        html = page.content.decode()
        # View code points at Weft's own /v1 (short ids are Weft's routing aliases); the
        # backend's URL, with or without its credentials, is never shown.
        assert "http://testserver/v1/completions" in html and host not in html
        assert SECRET not in html

        params = validate_params({"model": "scripted", "prompt": "Hi", "max_tokens": 1})
        with (
            caplog.at_level(logging.WARNING),
            BackendClient() as backend,
            pytest.raises(BackendError),
        ):
            backend.complete(params.with_changes(model="no-such-model"))
        assert "backend POST" in caplog.text and SECRET not in caplog.text

    settings.WEFT_BACKEND_URL = f"http://admin:{SECRET}@127.0.0.1:{free_port()}/v1"
    with BackendClient() as backend, pytest.raises(BackendError) as caught:
        backend.complete(params)
    assert caught.value.code == "connect_error" and SECRET not in caught.value.message


def test_it_keeps_credentials_out_of_config_errors():
    with pytest.raises(ImproperlyConfigured) as caught:
        database_from_url("DATABASE_URL", f"postgresql://weft:{SECRET}@db:notaport/weft")
    assert SECRET not in str(caught.value) and "DATABASE_URL" in str(caught.value)
    with pytest.raises(ImproperlyConfigured) as caught:
        check_http_url("WEFT_BACKEND_URL", f"ftp://u:{SECRET}@host/v1")
    assert SECRET not in str(caught.value)
