"""Fifty long-polls waiting at once on a queued job cost the web process no thread and
no database connection each: its thread count and the database's connection count stay
where they were (they wait on a Redis subscription in the event loop)."""

import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from django.db import connection

from tests.api.conftest import ASYNC

pytestmark = pytest.mark.django_db(transaction=True)

WAITERS = 50


def web_pid(url: str) -> int:
    port = url.rsplit(":", 1)[1].split("/")[0].encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"uvicorn" in b" ".join(cmdline) and port in cmdline:
            return int(proc.name)
    raise AssertionError(f"no uvicorn on port {port!r}")


def threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def db_connections() -> int:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchone()
    return count


def test_it_waits_on_redis_not_on_threads(proxy, api_key):
    api, _ = proxy  # no worker: the job stays queued, every long-poll waits it out
    auth = {"Authorization": f"Bearer {api_key()}"}
    job = httpx.post(
        f"{api}/completions",
        json={"model": "llama-8b", "prompt": "x", "max_tokens": 1},
        headers={**ASYNC, **auth},
    ).json()
    location = f"{api}/harvest/{job['id']}"
    pid = web_pid(api)
    httpx.get(location, headers=auth)  # warm: the key cached, pools open
    before = (threads(pid), db_connections())
    answers: list[httpx.Response] = []
    waiters = [
        threading.Thread(
            target=lambda: answers.append(
                httpx.get(location, params={"wait": "4"}, headers=auth, timeout=30)
            )
        )
        for _ in range(WAITERS)
    ]
    started = time.monotonic()
    for waiter in waiters:
        waiter.start()
    time.sleep(2)  # all of them waiting
    during = (threads(pid), db_connections())
    for waiter in waiters:
        waiter.join(30)
    assert len(answers) == WAITERS
    assert time.monotonic() - started >= 3.9  # they did wait out their 4 s
    assert all(a.status_code == 200 and a.json()["status"] == "queued" for a in answers)
    assert all("x-acs-longpoll" not in a.headers for a in answers)
    print(f"\nthreads {before[0]} -> {during[0]}, db connections {before[1]} -> {during[1]}")
    assert during[0] - before[0] <= 4, (before, during)
    assert during[1] - before[1] <= 4, (before, during)
