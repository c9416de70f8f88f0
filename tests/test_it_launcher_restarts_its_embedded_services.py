"""`make run`'s embedded Postgres and Redis are restarted like every other service:
a clean stop (a fast shutdown, exit code 0) or a crash (kill -9) is followed by a start
a second later, and the launcher says so and how often; meanwhile pages answer the
layout's "back in a moment" page (503) and /v1 the seed's envelope, 503
service_unavailable with Retry-After — never a 500 — and once the service is back,
everything answers again without restarting Weft."""

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.support import wait_until
from tests.test_it_launcher_lifecycle import Launcher, launch_env  # noqa: F401 - a fixture

SECRET = re.compile(r"weft-[0-9a-f]+\.[A-Za-z0-9_-]{20,}")


def redis_pid(data: Path) -> int:
    needle = str(data / "redis.sock").encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"redis-server" in cmdline and needle in cmdline:
            return int(entry.name)
    raise AssertionError("no embedded redis-server")


def postgres_pid(data: Path) -> int:
    return int((data / "pg" / "postmaster.pid").read_text().split()[0])


def signed_in(base: str, username: str, password: str) -> httpx.Client:
    http = httpx.Client(base_url=base, timeout=10)
    form = http.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    done = http.post(
        "/login/", data={"username": username, "password": password, "csrfmiddlewaretoken": token}
    )
    assert done.status_code == 302, done.text
    return http


def new_key(http: httpx.Client) -> str:
    page = http.get("/keys/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    made = http.post("/keys/", data={"name": "restart test", "csrfmiddlewaretoken": token})
    return SECRET.search(made.text).group(0)


def through_an_outage(kill, page, api, usual: int) -> tuple[list, list]:
    """Kill, then ask the page and /v1 until /v1 answered 503 and then both answered
    as usual again (the page 200, /v1 `usual`); every answer, in order."""
    pages, apis = [], []
    kill()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for seen, ask in ((pages, page), (apis, api)):
            try:
                seen.append(ask())
            except httpx.TransportError:
                seen.append(None)
        down = any(r is not None and r.status_code == 503 for r in apis)
        if down and apis[-1] is not None and apis[-1].status_code == usual:
            if pages[-1] is not None and pages[-1].status_code == 200:
                return pages, apis
        time.sleep(0.05)
    shown = [getattr(r, "status_code", r) for r in apis]
    raise AssertionError(f"no 503 then recovery: {shown[:10]} … {shown[-10:]}")


@pytest.mark.slow
def test_it_restarts_postgres_and_redis_and_answers_503_meanwhile(launch_env):  # noqa: F811
    data = Path(launch_env["WEFT_DATA_DIR"])
    base = f"http://127.0.0.1:{launch_env['WEFT_PORT']}"
    weft = Launcher(launch_env)
    try:
        wait_until(lambda: weft.find("ready at") or weft.proc.poll() is not None, 120, "make run")
        assert weft.find("ready at"), weft.lines
        shown = weft.find(r"^username: (\S+)  password: in (\S+)$")
        http = signed_in(base, shown[1], Path(shown[2]).read_text().strip())
        key = new_key(http)
        bearer = {"Authorization": f"Bearer {key}"}

        def page():
            return http.get("/workbench/")

        def api():
            return httpx.get(f"{base}/v1/models", headers=bearer, timeout=10)

        def api_db():
            # An unknown key is looked up in the database every time (a known one is
            # cached in the process for a while): 401, or 503 while the database is away.
            wrong = {"Authorization": f"Bearer {key[:-4]}xxxx"}
            return httpx.get(f"{base}/v1/models", headers=wrong, timeout=10)

        assert page().status_code == 200 and api().status_code == 200
        assert api_db().status_code == 401

        # Postgres: a clean fast shutdown (exit code 0), as an operator's pg_ctl stop.
        pages, apis = through_an_outage(
            lambda: os.kill(postgres_pid(data), signal.SIGINT), page, api_db, 401
        )
        wait_until(lambda: weft.find("postgres exited"), 10, "the launcher's word")
        assert weft.find(r"postgres exited with code 0; started it again \(1 time since"), (
            weft.lines
        )
        down_page = next((r for r in pages if r is not None and r.status_code == 503), None)
        assert down_page is not None, [getattr(r, "status_code", r) for r in pages]
        assert "Back in a moment" in down_page.text and 'class="card error-page"' in down_page.text
        assert down_page.headers["Retry-After"].isdigit()
        down_api = next(r for r in apis if r is not None and r.status_code == 503)
        assert down_api.json()["error"]["code"] == "service_unavailable"
        assert down_api.json()["request_id"] == down_api.headers["X-Request-Id"]
        assert down_api.headers["Retry-After"].isdigit()
        statuses = {r.status_code for r in pages + apis if r is not None}
        assert 500 not in statuses, statuses

        # Redis: a crash.
        pages, apis = through_an_outage(
            lambda: os.kill(redis_pid(data), signal.SIGKILL), page, api, 200
        )
        wait_until(lambda: weft.find("redis exited"), 10, "the launcher's word")
        assert weft.find(r"redis exited with code -9; started it again \(1 time since"), weft.lines
        down_api = next(r for r in apis if r is not None and r.status_code == 503)
        assert down_api.json()["error"]["code"] == "service_unavailable"
        assert down_api.headers["Retry-After"].isdigit()
        statuses = {r.status_code for r in pages + apis if r is not None}
        assert 500 not in statuses, statuses

        assert weft.proc.poll() is None and not weft.find("stopping"), weft.lines
        weft.proc.send_signal(signal.SIGINT)
        weft.proc.wait(timeout=30)
    finally:
        if weft.proc.poll() is None:
            weft.proc.kill()
