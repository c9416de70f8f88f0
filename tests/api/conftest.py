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


# --- the /v1 proxy: real ASGI servers on the test database, a scripted engine behind ---


class ProxyBackend:
    """The scripted engine behind the proxy: queue faults, read back what it received."""

    def __init__(self, base: str) -> None:
        self.base = base

    def faults(self, *faults: dict) -> None:
        import httpx

        httpx.post(
            f"{self.base}/_scripted/faults", json={"faults": list(faults)}
        ).raise_for_status()

    def requests(self, path: str = "/v1/completions") -> list[dict]:
        return scripted_received(self.base, path)

    def reset(self) -> None:
        import httpx

        httpx.delete(f"{self.base}/_scripted/faults").raise_for_status()
        httpx.delete(f"{self.base}/_scripted/requests").raise_for_status()


# The seed's examples name "llama-8b": here it is an alias of the scripted model.
PROXY_BACKENDS = '[{{"name": "scripted-gpu0", "url": "{url}/v1", "models": {{"llama-8b": "scripted", "scripted": "scripted"}}}}]'


@pytest.fixture(scope="session")
def proxy_engine():
    from engine.testing import run_engine

    with run_engine("scripted") as url:
        yield url


def proxy_env_for(engine: str, **extra: str) -> dict:
    from django.conf import settings

    from tests.support import child_env

    env = {
        "WEFT_BACKENDS": PROXY_BACKENDS.format(url=engine),
        "WEFT_DEFAULT_MODEL": "llama-8b",
        "WEFT_BACKEND_READ_TIMEOUT": "10",
        # A small request window: 30 s × 13 tokens/s = 390 tokens.
        "WEFT_API_REQUEST_WINDOW_SECONDS": "30",
        "WEFT_API_DECODE_RATE": "13",
        # Jobs submitted here are never run by another stack's worker.
        "WEFT_GENERATION_QUEUE": "api-proxy-unconsumed",
    }
    return child_env(settings.DATABASES["default"]["NAME"], **{**env, **extra})


@pytest.fixture(scope="session")
def proxy_web(django_db_setup, proxy_engine):
    """One real ASGI server (uvicorn, as `make run` starts it) in front of the scripted
    engine. Tests need django_db(transaction=True) so their keys are visible to it."""
    from tests.support import Supervisor, free_port, start_web

    sup = Supervisor()
    try:
        yield start_web(sup, proxy_env_for(proxy_engine), free_port())
    finally:
        sup.stop_all()


@pytest.fixture
def proxy(proxy_web, proxy_engine):
    """(base URL of Weft's /v1, the scripted backend) with a clean fault queue."""
    backend = ProxyBackend(proxy_engine)
    backend.reset()
    yield f"{proxy_web}/v1", backend
    backend.reset()


@pytest.fixture
def api_key(make_key):
    """A fresh key's secret (its own limits and budget)."""

    def make(budget: int | None = None, user=None) -> str:
        return make_key(user=user, budget=budget)[1]

    return make


LIMITS_ENV = {
    "WEFT_API_MAX_ACTIVE": "2",
    "WEFT_API_MAX_WAITING": "2",
    "WEFT_API_RATE_PER_MINUTE": "8",
    "WEFT_API_LEASE_SECONDS": "2",
}


@pytest.fixture(scope="session")
def limited_pair(django_db_setup, proxy_engine):
    """Two ASGI server processes on the same Redis and database, with small limits
    (2 active + 2 waiting per key, 8 starts a minute, 2 s leases)."""
    from tests.support import Supervisor, free_port, start_web

    sup = Supervisor()
    env = proxy_env_for(proxy_engine, **LIMITS_ENV)
    try:
        yield [start_web(sup, env, free_port()) + "/v1" for _ in range(2)], env
    finally:
        sup.stop_all()


# --- completion jobs: an ASGI server and a Celery worker on their own queue ---------------

JOBS_ENV = {
    "WEFT_GENERATION_QUEUE": "api-jobs",
    "WEFT_CHECKPOINT_INTERVAL_SECONDS": "0.2",
    "WEFT_GENERATION_STALE_SECONDS": "2",
    "WEFT_JOB_MAX_LONGPOLLS": "3",
    "WEFT_JOB_MAX_LONGPOLLS_PER_KEY": "3",  # the share is tested on its own
}


@pytest.fixture(scope="session")
def jobs_stack(django_db_setup, proxy_engine, tmp_path_factory):
    """{"api": Weft's /v1 base, "env", "supervisor", "logs"}: the web server and one
    worker (concurrency 2) in front of the scripted engine. Tests need
    django_db(transaction=True)."""
    from tests.support import Supervisor, free_port, start_web, start_worker

    sup = Supervisor()
    env = proxy_env_for(proxy_engine, **JOBS_ENV)
    logs = tmp_path_factory.mktemp("jobs")
    try:
        url = start_web(sup, env, free_port())
        start_worker(sup, env, logs / "worker.log", concurrency=2)
        yield {"api": f"{url}/v1", "env": env, "supervisor": sup, "logs": logs}
    finally:
        sup.stop_all()


@pytest.fixture
def jobs_api(jobs_stack, proxy_engine):
    """(Weft's /v1 base with a worker behind it, the scripted backend)."""
    backend = ProxyBackend(proxy_engine)
    backend.reset()
    yield jobs_stack["api"], backend
    backend.reset()


ASYNC = {"Prefer": "respond-async"}


def harvest_until(http, location: str, statuses: set[str], timeout: float = 30.0) -> dict:
    """Long-poll a job until it reaches one of `statuses`."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = http.get(location, params={"wait": "5"}, timeout=15)
        assert answer.status_code == 200, answer.text
        if answer.json()["status"] in statuses:
            return answer.json()
    raise AssertionError(f"{location} not {statuses} within {timeout} s: {answer.json()}")


# --- per-person caps: small caps for each person, the per-key ones left large ------------

PERSON_ENV = {
    "WEFT_GENERATION_QUEUE": "api-person-caps",
    "WEFT_CHECKPOINT_INTERVAL_SECONDS": "0.2",
    "WEFT_API_USER_MAX_ACTIVE": "2",
    "WEFT_API_USER_MAX_WAITING": "1",
    "WEFT_API_USER_RATE_PER_MINUTE": "30",
    "WEFT_API_USER_MAX_JOBS": "2",
    "WEFT_JOB_MAX_LONGPOLLS_PER_USER": "1",
    "WEFT_API_USER_STORED_BYTES": "40000",
}


@pytest.fixture(scope="session")
def person_stack(django_db_setup, proxy_engine, tmp_path_factory):
    """(Weft's /v1 base, the scripted backend, the env): a web server and a worker
    whose per-person caps (PERSON_ENV) are far below the per-key ones, so a person with
    several keys meets them first. Tests need django_db(transaction=True)."""
    from tests.support import Supervisor, free_port, start_web, start_worker

    sup = Supervisor()
    env = proxy_env_for(proxy_engine, **PERSON_ENV)
    try:
        url = start_web(sup, env, free_port())
        start_worker(sup, env, tmp_path_factory.mktemp("person") / "worker.log", concurrency=4)
        yield f"{url}/v1", ProxyBackend(proxy_engine), env
    finally:
        sup.stop_all()


@pytest.fixture
def person_api(person_stack):
    api, backend, _ = person_stack
    backend.reset()
    yield api, backend
    backend.reset()


@pytest.fixture
def person_keys(make_user, make_key):
    """person_keys(count) -> [httpx.Client] of one new person, one client per key."""
    import httpx

    made: list = []

    def make(api: str, count: int) -> list:
        user = make_user()
        clients = []
        for i in range(count):
            _, secret = make_key(user=user, name=f"key {i}")
            clients.append(httpx.Client(base_url=api, timeout=60,
                                        headers={"Authorization": f"Bearer {secret}"}))  # fmt: skip
        made.extend(clients)
        return clients

    yield make
    for client in made:
        client.close()


@pytest.fixture
def stored_result():
    """stored_result(key, size) -> a finished job of the key's user keeping `size` bytes
    of result (one ResultChunk), as a worker leaves it."""
    from datetime import timedelta

    from django.utils import timezone

    from api.models import new_job_id
    from completions.models import JOB_CONTENT_TTL, Generation, ResultChunk

    def make(key, size: int) -> Generation:
        now = timezone.now()
        job = Generation.objects.create(
            owner_id=key.user_id, key=key, kind="job", lane="jobs", params={},
            state="done", public_id=new_job_id(), result_token="stored", result_bytes=size,
            created_at=now - timedelta(seconds=5), started_at=now - timedelta(seconds=4),
            finished_at=now, expires_at=now + JOB_CONTENT_TTL,
        )  # fmt: skip
        ResultChunk.objects.create(generation=job, run_token="stored", seq=0, data=b"x" * size)
        return job

    return make


def key_of(client):
    """The ApiKey behind a person_keys client."""
    from api.models import ApiKey

    secret = client.headers["authorization"].split()[1]
    return ApiKey.objects.get(prefix=secret.partition(".")[0])
