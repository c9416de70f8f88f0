"""SIGKILL the worker while it runs a job: beat sees the job's heartbeat go stale and
queues it again; a new worker runs it to the end. The job is not lost, and it is
charged once — what the run that finished reported — with nothing left reserved."""

import httpx
import pytest

from completions.budget import key_summary
from completions.models import BudgetMonth, Generation
from tests.api.conftest import ASYNC, ProxyBackend, harvest_until
from tests.api.jobstack import JobStack

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def stack(django_db_setup, proxy_engine):
    with JobStack(proxy_engine) as stack:
        yield stack


def test_it_runs_the_job_again_and_charges_once(stack, proxy_engine, make_key):
    backend = ProxyBackend(proxy_engine)
    backend.reset()
    key, secret = make_key()
    http = httpx.Client(
        base_url=stack.api, headers={"Authorization": f"Bearer {secret}"}, timeout=30
    )
    backend.faults({"first_byte_delay": 8})  # the first attempt is killed long before
    body = {"model": "llama-8b", "prompt": [5, 6, 7], "max_tokens": 8, "seed": 11}
    job = http.post("/completions", json=body, headers=ASYNC).json()
    stack.wait(
        lambda: Generation.objects.filter(kind="job").get(public_id=job["id"]).state == "running",
        15,
        "running",
    )
    stack.kill(stack.worker)
    stack.start_worker()

    done = harvest_until(http, f"/harvest/{job['id']}", {"succeeded", "failed"}, timeout=60)
    assert done["status"] == "succeeded", done
    row = Generation.objects.filter(kind="job").get(public_id=job["id"])
    assert row.attempts == 2
    # (the engine logs a request when it answers: the killed attempt may not show)
    assert 1 <= len([r for r in backend.requests() if r["body"].get("seed") == 11]) <= 2
    total = done["result"]["usage"]["total_tokens"]
    assert row.charged_tokens == total
    month = BudgetMonth.objects.get(account=f"key:{key.pk}")
    assert (month.used, month.reserved) == (total, 0)
    assert key_summary(key)["reserved"] == 0
    backend.reset()
