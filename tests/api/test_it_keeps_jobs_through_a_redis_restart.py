"""Restart Redis (no persistence: the broker's queued messages are lost with it):

- a job queued while no worker was up loses its Celery message; beat sends it again
  and it runs, once;
- a job running at the restart ends normally, and a long-poll waiting on it through
  the restart still answers with the result (it also looks at the row itself).

Each is charged once, nothing stays reserved."""

import threading
import time

import httpx
import pytest

from completions.budget import key_summary
from completions.models import Generation
from tests.api.conftest import ASYNC, ProxyBackend, harvest_until
from tests.api.jobstack import JobStack

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def stack(django_db_setup, proxy_engine):
    with JobStack(proxy_engine) as stack:
        yield stack


def client(stack: JobStack, secret: str) -> httpx.Client:
    return httpx.Client(
        base_url=stack.api, headers={"Authorization": f"Bearer {secret}"}, timeout=30
    )


def test_it_sends_again_a_message_lost_with_redis(stack, proxy_engine, make_key):
    backend = ProxyBackend(proxy_engine)
    backend.reset()
    key, secret = make_key()
    http = client(stack, secret)
    stack.kill(stack.worker)
    body = {"model": "llama-8b", "prompt": [1, 2], "max_tokens": 4, "seed": 21}
    job = http.post("/completions", json=body, headers=ASYNC).json()
    assert job["status"] == "queued"
    stack.restart_redis()  # the job's message is gone
    stack.start_worker()
    done = harvest_until(http, f"/harvest/{job['id']}", {"succeeded", "failed"}, timeout=60)
    assert done["status"] == "succeeded", done
    assert Generation.objects.filter(kind="job").get(public_id=job["id"]).attempts == 1
    assert len([r for r in backend.requests() if r["body"].get("seed") == 21]) == 1
    summary = key_summary(key)
    assert (summary["used"], summary["reserved"]) == (done["result"]["usage"]["total_tokens"], 0)


def test_it_finishes_a_running_job_and_its_long_poll(stack, proxy_engine, make_key):
    backend = ProxyBackend(proxy_engine)
    backend.reset()
    key, secret = make_key()
    http = client(stack, secret)
    backend.faults({"first_byte_delay": 3})
    body = {"model": "llama-8b", "prompt": [3, 4], "max_tokens": 4, "seed": 22}
    job = http.post("/completions", json=body, headers=ASYNC).json()
    stack.wait(
        lambda: Generation.objects.filter(kind="job").get(public_id=job["id"]).state == "running",
        15,
        "running",
    )
    polled: list[httpx.Response] = []
    waiter = threading.Thread(
        target=lambda: polled.append(http.get(f"/harvest/{job['id']}", params={"wait": "20"}))
    )
    waiter.start()
    time.sleep(0.5)
    stack.restart_redis()
    waiter.join(30)
    assert polled and polled[0].status_code == 200, polled
    assert polled[0].json()["status"] == "succeeded"
    row = Generation.objects.filter(kind="job").get(public_id=job["id"])
    assert row.attempts == 1
    assert key_summary(key)["reserved"] == 0
    assert key_summary(key)["used"] == row.charged_tokens > 0
