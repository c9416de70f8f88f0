"""A job is validated, budgeted and clamped when it is submitted, exactly like a
synchronous request: the clamp is in the 202 (header and body) and is what the worker
sends; a body the schema refuses, a budget with nothing left, or a streamed job is
refused there — no job, nothing sent."""

import httpx
import pytest

from completions.budget import key_summary
from completions.models import Generation
from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_clamps_at_submission(jobs_api, make_key):
    api, backend = jobs_api
    key, secret = make_key(budget=40)
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    body = {"model": "llama-8b", "prompt": [1, 2, 3, 4], "max_tokens": 100}
    submitted = http.post("/completions", json=body, headers=ASYNC)
    assert submitted.status_code == 202, submitted.text
    header = submitted.headers["x-acs-max-tokens-clamped"]
    assert header == "requested=100,applied=36,reason=budget,source=client"
    clamp = submitted.json()["max_tokens_clamped"]
    assert clamp == {"requested": 100, "applied": 36, "reason": "budget", "source": "client"}
    done = harvest_until(http, f"/harvest/{submitted.json()['id']}", {"succeeded"})
    assert done["max_tokens_clamped"] == clamp
    assert backend.requests()[-1]["body"]["max_tokens"] == 36
    assert key_summary(key)["used"] <= 40

    # Nothing left: 429 budget_exceeded, as for a synchronous request, and no job.
    http.post("/completions", json={**body, "max_tokens": 1}, headers=ASYNC)
    refused = http.post("/completions", json=body, headers=ASYNC)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "budget_exceeded"
    assert "retry-after" in refused.headers


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"model": "llama-8b", "prompt": "x", "temperature": 200}, "invalid_request", "temperature"),
        ({"model": "nope", "prompt": "x"}, "model_not_found", "model"),
        ({"model": "llama-8b", "prompt": "x", "extra_body": {}}, "invalid_request", "extra_body"),
        ({"model": "llama-8b", "prompt": "x", "max_tokens": 4, "stream": True}, "invalid_request",
         "stream"),
    ],
)  # fmt: skip
def test_it_refuses_what_a_synchronous_request_refuses(jobs_api, make_key, body, code, param):
    api, backend = jobs_api
    key, secret = make_key()
    answer = httpx.post(
        f"{api}/completions", json=body, headers={**ASYNC, "Authorization": f"Bearer {secret}"}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == code
    assert answer.json()["error"]["param"] == param
    assert Generation.objects.filter(kind="job").filter(key=key).count() == 0
    assert backend.requests() == []
    assert key_summary(key)["reserved"] == 0
