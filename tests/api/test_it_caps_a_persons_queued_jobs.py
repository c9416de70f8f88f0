"""Jobs queued or running are capped per person as well as per key: a person whose keys
together hold 2 (PERSON_ENV; each key may hold 256) is refused 429 queue_full with
Retry-After on another key, and nothing is reserved for it; another person's job is
accepted."""

import pytest

from api.models import ApiKey
from completions.budget import key_summary as usage_summary
from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Once", "max_tokens": 4}


def test_it_refuses_a_person_at_the_job_cap_and_takes_another(person_api, person_keys):
    api, backend = person_api
    a1, a2, a3 = person_keys(api, 3)
    (b,) = person_keys(api, 1)
    backend.faults(*[{"token_delay": 0.5}] * 2)  # both still running for ~2 s
    first = a1.post("/completions", json=BODY, headers=ASYNC)
    second = a2.post("/completions", json=BODY, headers=ASYNC)
    assert (first.status_code, second.status_code) == (202, 202)

    refused = a3.post("/completions", json=BODY, headers=ASYNC)
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "queue_full"
    assert "your keys together" in refused.json()["error"]["message"]
    assert refused.headers["retry-after"] == "1"
    key3 = ApiKey.objects.get(prefix=a3.headers["authorization"].split()[1].partition(".")[0])
    assert usage_summary(key3)["reserved"] == 0

    accepted = b.post("/completions", json=BODY, headers=ASYNC)
    assert accepted.status_code == 202, accepted.text
    for client, job in ((a1, first), (a2, second), (b, accepted)):
        harvest_until(client, f"/harvest/{job.json()['id']}", {"succeeded"})
    # Room again once they ended.
    again = a3.post("/completions", json=BODY, headers=ASYNC)
    assert again.status_code == 202, again.text
    harvest_until(a3, f"/harvest/{again.json()['id']}", {"succeeded"})
