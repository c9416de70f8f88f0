"""A backend's JSON answer that says nothing of its usage is charged the same way on
the synchronous path and for a job: the prompt and every token that was asked for
(the most it can have been; never more than was reserved) — not the prompt alone on
one path and the worst case on the other."""

import httpx
import pytest

from api.models import ApiRequest
from completions.models import Generation
from tests.api.conftest import ASYNC, harvest_until
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

# Token ids: the prompt is exactly 4 tokens, counted without asking the backend.
BODY = {"model": "llama-8b", "prompt": [11, 12, 13, 14], "max_tokens": 6, "n": 2}
EXPECTED = 4 + 6 * 2


def test_it_charges_prompt_and_asked_tokens_on_both_paths(jobs_api, make_key):
    api, backend = jobs_api
    key, secret = make_key()
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {secret}"}, timeout=30)

    backend.faults({"no_usage": True})
    sync = http.post("/completions", json=BODY)
    assert sync.status_code == 200 and "usage" not in sync.json()
    wait_until(lambda: ApiRequest.objects.filter(key=key, settled=True).exists(), 10, "settled")
    row = ApiRequest.objects.get(key=key)
    assert (row.prompt_tokens, row.completion_tokens) == (4, 12)

    backend.faults({"no_usage": True})
    job = http.post("/completions", json=BODY, headers=ASYNC).json()
    done = harvest_until(http, f"/harvest/{job['id']}", {"succeeded"})
    assert "usage" not in done["result"]  # the backend's body, as it came
    assert done["usage"]["charged_tokens"] == EXPECTED
    run = Generation.objects.get(public_id=job["id"])
    assert run.charged_tokens == EXPECTED
