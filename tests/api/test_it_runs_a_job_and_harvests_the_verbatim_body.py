"""POST /v1/completions with `Prefer: respond-async`: 202 with the job and its Location;
a real worker runs it; GET /v1/harvest/<id> returns it succeeded with `result` byte for
byte the body the synchronous request gets for the same seeded body — and the key is
charged exactly what the backend reported, once."""

import json

import httpx
import pytest

from api.models import ApiKey, ApiRequest
from completions.budget import key_summary
from completions.models import Generation
from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "The capital of France is", "max_tokens": 6, "seed": 3,
        "logprobs": 2}  # fmt: skip


def test_it_answers_202_and_harvests_the_same_body_as_a_synchronous_request(jobs_api, make_key):
    api, backend = jobs_api
    key, secret = make_key()
    http = httpx.Client(
        base_url=api.removesuffix("/v1"), headers={"Authorization": f"Bearer {secret}"}
    )
    submitted = http.post("/v1/completions", json=BODY, headers=ASYNC)
    assert submitted.status_code == 202, submitted.text
    job = submitted.json()
    assert job["object"] == "completion.job"
    assert job["id"].startswith("job-")
    assert job["status"] in ("queued", "running", "succeeded")
    assert isinstance(job["created_at"], int)
    assert job["max_tokens_clamped"] is None
    assert submitted.headers["location"] == f"/v1/harvest/{job['id']}"
    assert submitted.headers["preference-applied"] == "respond-async"
    assert submitted.headers["x-request-id"]

    done = harvest_until(http, submitted.headers["location"], {"succeeded", "failed"})
    assert done["status"] == "succeeded", done
    sync = http.post("/v1/completions", json=BODY)
    assert sync.status_code == 200
    # Verbatim: the raw bytes of `result` inside the harvest body are the sync body's
    # (apart from the backend's per-response id and timestamp).
    raw = http.get(submitted.headers["location"]).content
    spliced = raw[raw.index(b'"result":') + len(b'"result":') : -1]
    expected = json.loads(sync.content)
    got = json.loads(spliced)
    for volatile in ("id", "created"):
        expected.pop(volatile, None)
        got.pop(volatile, None)
    assert got == expected
    assert spliced.decode().count('"choices"') == 1
    assert done["result"]["object"] == "text_completion"

    # Charged once, exactly the backend's usage; nothing stays reserved.
    row = Generation.objects.filter(kind="job").get(public_id=job["id"])
    usage = done["result"]["usage"]
    assert row.charged_tokens == usage["total_tokens"]
    assert done["usage"]["charged_tokens"] == usage["total_tokens"]
    submission = ApiRequest.objects.get(pk=row.api_request_id)
    assert submission.settled and submission.status == 202
    summary = key_summary(ApiKey.objects.get(pk=key.pk))
    assert summary["reserved"] == 0
    assert summary["used"] == usage["total_tokens"] * 2  # the job and the sync request
    assert len(backend.requests()) == 2


def test_it_changes_nothing_without_the_header(jobs_api, api_key):
    api, _ = jobs_api
    answer = httpx.post(
        f"{api}/completions", json=BODY, headers={"Authorization": f"Bearer {api_key()}"}
    )
    assert answer.status_code == 200
    assert answer.json()["object"] == "text_completion"
    assert "location" not in answer.headers
    assert Generation.objects.filter(kind="job").count() == 0
