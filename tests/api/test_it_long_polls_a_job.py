"""GET /v1/harvest/<id>?wait=S: answers as soon as the job ends (woken through Redis,
not after S), at once with wait=0 or for a finished job, and validates S (0 to the
documented bound, once) with the envelope."""

import time

import httpx
import pytest

from tests.api.conftest import ASYNC

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "A long wait", "max_tokens": 3}


def test_it_answers_when_the_job_ends(jobs_api, api_key):
    api, backend = jobs_api
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {api_key()}"}, timeout=30)
    backend.faults({"first_byte_delay": 1.5})
    job = http.post("/completions", json=BODY, headers=ASYNC).json()
    now = http.get(f"/harvest/{job['id']}", params={"wait": "0"})
    assert now.status_code == 200 and now.json()["status"] in ("queued", "running")
    assert "x-acs-longpoll" not in now.headers
    started = time.monotonic()
    done = http.get(f"/harvest/{job['id']}", params={"wait": "20"})
    took = time.monotonic() - started
    assert done.status_code == 200
    assert done.json()["status"] == "succeeded"
    assert took < 6, took  # woken by the end, not by the 20 s bound
    started = time.monotonic()
    again = http.get(f"/harvest/{job['id']}", params={"wait": "20"})
    assert again.json()["status"] == "succeeded" and time.monotonic() - started < 1


@pytest.mark.parametrize(
    "query", ["wait=abc", "wait=-1", "wait=31", "wait=1e3", "wait=", "wait=1&wait=2",
              "wait=nan", "other=1", "wait=1&other=1"],
)  # fmt: skip
def test_it_refuses_a_bad_wait(jobs_api, api_key, query):
    api, _ = jobs_api
    secret = api_key()
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    job = http.post("/completions", json=BODY, headers=ASYNC).json()
    answer = http.get(f"/harvest/{job['id']}?{query}")
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["param"] in ("wait", "other")
    assert answer.headers["x-request-id"] == answer.json()["request_id"]
