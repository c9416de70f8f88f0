"""A job whose result passes its person's stored-bytes quota while it is being stored
(here another of the person's results was stored meanwhile) is stopped cleanly: it
fails with queue_full saying why, what it had stored is deleted, and another person's
job beside it succeeds."""

import time

import pytest

from api.quotas import stored_bytes
from completions.models import Generation, ResultChunk
from tests.api.conftest import ASYNC, harvest_until, key_of

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Once", "max_tokens": 6}


def test_it_stops_the_job_and_frees_its_bytes(person_api, person_keys, stored_result):
    api, backend = person_api
    (a,) = person_keys(api, 1)
    (b,) = person_keys(api, 1)
    backend.faults({"token_delay": 0.3}, {"token_delay": 0.3})  # ~2 s each
    job = a.post("/completions", json=BODY, headers=ASYNC)
    other = b.post("/completions", json=BODY, headers=ASYNC)
    assert (job.status_code, other.status_code) == (202, 202), job.text
    time.sleep(0.3)
    earlier = stored_result(key_of(a), 39_900)  # finished meanwhile: little room left

    done = harvest_until(a, f"/harvest/{job.json()['id']}", {"succeeded", "failed"})
    assert done["status"] == "failed"
    assert done["error"]["error"]["code"] == "queue_full"
    assert "stopped" in done["error"]["error"]["message"]
    run = Generation.objects.get(public_id=job.json()["id"])
    assert not ResultChunk.objects.filter(generation=run).exists()
    assert run.result_bytes == 0 and run.charged_tokens is not None
    assert stored_bytes(key_of(a).user_id) == earlier.result_bytes

    theirs = harvest_until(b, f"/harvest/{other.json()['id']}", {"succeeded", "failed"})
    assert theirs["status"] == "succeeded"
