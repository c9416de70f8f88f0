"""WEFT_JOB_MAX_LONGPOLLS (3 in this stack) long-polls wait at once; one more is
answered at once, as a normal 200 with the job as it is, `X-Acs-Longpoll: declined`
and `Retry-After`. The waiting ones still get the job when it ends, and their places
are free again afterwards."""

import threading
import time

import httpx
import pytest

from tests.api.conftest import ASYNC

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Crowded", "max_tokens": 2}


def test_it_declines_the_long_poll_past_the_limit(jobs_api, api_key):
    api, backend = jobs_api
    auth = {"Authorization": f"Bearer {api_key()}"}
    backend.faults({"first_byte_delay": 4})
    job = httpx.post(f"{api}/completions", json=BODY, headers={**ASYNC, **auth}).json()
    location = f"{api}/harvest/{job['id']}"
    answers: list[httpx.Response] = []

    def wait() -> None:
        answers.append(httpx.get(location, params={"wait": "15"}, headers=auth, timeout=30))

    waiters = [threading.Thread(target=wait) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    time.sleep(1.0)  # all three are waiting
    started = time.monotonic()
    declined = httpx.get(location, params={"wait": "15"}, headers=auth, timeout=30)
    assert time.monotonic() - started < 1.5
    assert declined.status_code == 200
    assert declined.headers["x-acs-longpoll"] == "declined"
    assert int(declined.headers["retry-after"]) >= 1
    assert declined.json()["status"] in ("queued", "running")
    for waiter in waiters:
        waiter.join(30)
    assert [a.json()["status"] for a in answers] == ["succeeded"] * 3
    assert all("x-acs-longpoll" not in a.headers for a in answers)
    # The places are free again.
    later = httpx.get(location, params={"wait": "1"}, headers=auth)
    assert "x-acs-longpoll" not in later.headers
