"""A job's worst-case result is checked against its person's stored-bytes quota before
anything is reserved (PERSON_ENV: 40,000 bytes): a person whose stored results leave no
room is refused 429 queue_full with Retry-After (until the next stored result expires),
on every key, while another person's job is accepted; a job that could not fit even
with nothing stored is a 400."""

import pytest

from completions.budget import key_summary as usage_summary
from tests.api.conftest import ASYNC, harvest_until, key_of

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Once", "max_tokens": 4}


def test_it_refuses_a_person_at_the_quota_and_takes_another(person_api, person_keys, stored_result):
    api, _ = person_api
    a1, a2 = person_keys(api, 2)
    (b,) = person_keys(api, 1)
    stored_result(key_of(a1), 39_000)
    for client in (a1, a2):
        refused = client.post("/completions", json=BODY, headers=ASYNC)
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "queue_full"
        assert "stored job results" in error["message"]
        # Until the stored result expires (24 h) and the sweep has run.
        assert 86_000 <= int(refused.headers["retry-after"]) <= 86_400 + 301
        assert usage_summary(key_of(client))["reserved"] == 0

    accepted = b.post("/completions", json=BODY, headers=ASYNC)
    assert accepted.status_code == 202, accepted.text
    harvest_until(b, f"/harvest/{accepted.json()['id']}", {"succeeded"})


def test_it_refuses_a_job_that_could_never_fit(person_api, person_keys):
    api, _ = person_api
    (a,) = person_keys(api, 1)
    body = {**BODY, "prompt": "one two three four five six seven eight", "max_tokens": 1,
            "prompt_logprobs": -1}  # fmt: skip
    refused = a.post("/completions", json=body, headers=ASYNC)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "invalid_request"
    assert refused.json()["error"]["param"] == "prompt_logprobs"
    # The same job, not stored (no Prefer: respond-async), is answered.
    assert a.post("/completions", json=body).status_code == 200
