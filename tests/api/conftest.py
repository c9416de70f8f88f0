import pytest


@pytest.fixture
def make_key(make_user):
    """An API key and its secret: make_key(user=None, name="test", budget=None)."""
    from api.models import ApiKey

    def make(user=None, name: str = "test", budget: int | None = None):
        return ApiKey.objects.create_key(user or make_user(), name, budget=budget)

    return make


# --- model routing: the local engine (the real model) and a scripted engine at once ---


@pytest.fixture(scope="session")
def local_engine():
    pytest.importorskip("llama_cpp")
    from engine.testing import run_engine

    with run_engine("llama", n_threads=1, startup_timeout=120) as url:
        yield url


@pytest.fixture(scope="session")
def routing_scripted_engine():
    from engine.testing import run_engine

    with run_engine("scripted") as url:
        yield url


@pytest.fixture
def two_backends(settings, monkeypatch, local_engine, routing_scripted_engine):
    """WEFT_BACKENDS as an operator writes it: the local engine under its own id
    (smollm2-135m) and the scripted engine's "scripted" model under the alias "tiny",
    with its own key. Returns the scripted engine's base URL."""
    import json

    import httpx

    from completions.client import forget_backend_cache
    from config.env import env_backends

    monkeypatch.setenv(
        "WEFT_BACKENDS",
        json.dumps(
            [
                {"url": "local"},
                {
                    "name": "scripted",
                    "url": f"{routing_scripted_engine}/v1",
                    "api_key": "sk-scripted",
                    "models": {"tiny": "scripted"},
                },
            ]
        ),
    )
    settings.WEFT_BACKENDS = env_backends("WEFT_BACKENDS")
    settings.WEFT_BACKEND_URL = f"{local_engine}/v1"
    settings.WEFT_BACKEND_API_KEY = ""
    settings.WEFT_DEFAULT_MODEL = ""
    httpx.delete(f"{routing_scripted_engine}/_scripted/requests").raise_for_status()
    httpx.delete(f"{routing_scripted_engine}/_scripted/faults").raise_for_status()
    forget_backend_cache()
    yield routing_scripted_engine
    forget_backend_cache()


def scripted_received(base: str, path: str = "/v1/completions") -> list[dict]:
    import httpx

    got = httpx.get(f"{base}/_scripted/requests").json()["requests"]
    return [r for r in got if r["path"] == path]
