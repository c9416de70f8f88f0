import os
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher, make_password

# Every Chromium test fails on a page or console error (tests/browser/page_errors.py).
from tests.browser.page_errors import browser, pytest_configure, pytest_runtest_call  # noqa: F401
from tests.support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Supervisor,
    child_env,
    free_port,
    start_web,
    start_worker,
)

# Playwright's sync API runs an event loop in the test thread; Django would
# otherwise refuse ORM calls made beside it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ARTIFACTS = Path(__file__).resolve().parent.parent / ".artifacts"


class _FewIterations(PBKDF2PasswordHasher):
    """Django's own hasher (any Weft process checks its hashes: the iterations are in
    the hash) with 1,000 iterations: the default's 1.2 million cost 0.3-0.7 s a user
    on this machine, and the suite makes hundreds of users."""

    iterations = 1000


@pytest.fixture(scope="session", autouse=True)
def _flush_despite_live_servers():
    """A transactional test ends with a flush (TRUNCATE of every table) while the live
    servers it used may still be finishing its work: a worker settling a job, a web
    process writing a request's metadata after the response. TRUNCATE takes its
    locks table by table, so it can deadlock with such a transaction; Postgres then
    cancels one of the two, sometimes the flush. Here a flush cancelled so is run
    again (the other transaction has gone through by then)."""
    import time

    from django.core.management.commands import flush
    from django.db import OperationalError

    handle = flush.Command.handle

    def retrying(self, **options):
        for attempt in range(4):
            try:
                return handle(self, **options)
            except flush.CommandError as exc:
                if attempt == 3 or not isinstance(exc.__cause__, OperationalError):
                    raise
                time.sleep(0.2)

    flush.Command.handle = retrying
    yield
    flush.Command.handle = handle


@pytest.fixture
def make_user(django_user_model):
    counter = iter(range(1, 10_000))

    def make(username: str | None = None, password: str = "a-long-test-password", **fields):
        username = username or f"user{next(counter)}"
        user = django_user_model.objects.create_user(username=username, password=None, **fields)
        user.password = make_password(password, hasher=_FewIterations())
        user.save(update_fields=["password"])
        return user

    return make


@pytest.fixture(scope="session")
def stack_env(django_db_setup, tmp_path_factory):
    """Environment for real Weft processes pointed at the test database."""
    from django.conf import settings

    return child_env(settings.DATABASES["default"]["NAME"])


@pytest.fixture(scope="session")
def stack(stack_env, tmp_path_factory):
    """The real ASGI server and a real Celery worker on the test database and
    the test Redis. Tests using it need django_db(transaction=True) so that the
    rows they create are committed and visible to these processes."""
    sup = Supervisor()
    logs = tmp_path_factory.mktemp("stack")
    try:
        url = start_web(sup, stack_env, free_port())
        start_worker(sup, stack_env, logs / "worker.log")
        yield {"url": url, "env": stack_env, "supervisor": sup, "logs": logs}
    finally:
        sup.stop_all()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    # Debian's Chromium, never a downloaded browser (`playwright install` fails here).
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture
def login(page):
    """Log a user in through the real login form."""

    def do(base_url: str, username: str, password: str = "a-long-test-password"):
        page.goto(f"{base_url}/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(lambda url: "/login/" not in url)
        return page

    return do


@pytest.fixture
def session_cookie(client):
    """A sessionid for `user`, for WebSocket clients."""

    def make(user) -> str:
        client.force_login(user)
        return client.cookies["sessionid"].value

    return make


@pytest.fixture(scope="session")
def artifacts_dir():
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def pytest_collection_modifyitems(session, config, items):
    # Playwright's sync API leaves its event loop running in the main thread for the
    # rest of the session; tests that call asyncio.run / async_to_sync themselves
    # must therefore run before the first browser test.
    items.sort(key=lambda item: "page" in getattr(item, "fixturenames", ()))
