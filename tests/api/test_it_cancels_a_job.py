"""DELETE /v1/harvest/<id>: a queued job is cancelled at once and never sent (its
reservation given back, nothing charged); a running one is stopped by its worker
within a beat — the upstream request closed — and charged no more than the prompt and
what can have been generated meanwhile. Deleting a finished job changes nothing."""

import httpx
import pytest

from completions.budget import key_summary
from completions.models import Generation
from tests.api.conftest import ASYNC, harvest_until
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def body(n: int) -> dict:
    return {"model": "llama-8b", "prompt": [1, 2, 3], "max_tokens": 50, "seed": n}


def test_it_cancels_queued_and_running_jobs(jobs_api, make_key):
    api, backend = jobs_api
    key, secret = make_key()
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    # Two slow jobs fill the worker's two threads; the third waits in the queue.
    backend.faults({"first_byte_delay": 6}, {"first_byte_delay": 6})
    running = [http.post("/completions", json=body(i), headers=ASYNC).json() for i in (1, 2)]
    wait_until(
        lambda: Generation.objects.filter(kind="job").filter(state="running").count() == 2,
        15,
        "two running",
    )
    queued = http.post("/completions", json=body(3), headers=ASYNC).json()
    assert http.get(f"/harvest/{queued['id']}").json()["status"] == "queued"

    gone = http.delete(f"/harvest/{queued['id']}")
    assert gone.status_code == 200
    assert gone.json()["status"] == "cancelled"
    assert gone.json()["usage"]["charged_tokens"] == 0

    stopping = http.delete(f"/harvest/{running[0]['id']}")
    assert stopping.status_code == 200
    assert stopping.json()["status"] in ("running", "cancelled")
    stopped = harvest_until(http, f"/harvest/{running[0]['id']}", {"cancelled"}, timeout=5)
    assert "result" not in stopped
    row = Generation.objects.filter(kind="job").get(public_id=running[0]["id"])
    reserved = row.api_request.reserved_tokens
    assert 3 <= row.charged_tokens <= reserved

    finished = harvest_until(http, f"/harvest/{running[1]['id']}", {"succeeded"})
    after = http.delete(f"/harvest/{running[1]['id']}")
    assert after.json()["status"] == "succeeded"
    assert after.json()["result"] == finished["result"]

    sent = [r["body"].get("seed") for r in backend.requests()]
    assert 3 not in sent  # the cancelled queued job never reached the backend
    assert key_summary(key)["reserved"] == 0
