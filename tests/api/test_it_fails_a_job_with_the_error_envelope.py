"""A job the backend fails ends `failed` with `error` the envelope a synchronous
request would have answered with (the seed's code for the fault), charged what a
synchronous failure is: the prompt, counted exactly, no completion."""

import httpx
import pytest

from completions.budget import key_summary
from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Doomed", "max_tokens": 4}


@pytest.mark.parametrize(
    ("fault", "code"),
    [({"status": 503}, "upstream_unavailable"), ({"status": 504}, "upstream_deadline"),
     ({"status": 500}, "upstream_error"), ({"cut_after": 1}, "upstream_error")],
)  # fmt: skip
def test_it_stores_the_seeds_error_envelope(jobs_api, make_key, fault, code):
    api, backend = jobs_api
    key, secret = make_key()
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    sync = None
    if "status" in fault:  # (a cut synchronous body cannot be read as an envelope)
        backend.faults(fault)
        sync = http.post("/completions", json=BODY).json()["error"]
    backend.faults(fault)
    job = http.post("/completions", json=BODY, headers=ASYNC).json()
    failed = harvest_until(http, f"/harvest/{job['id']}", {"failed", "succeeded"})
    assert failed["status"] == "failed"
    assert "result" not in failed
    envelope = failed["error"]
    assert envelope["error"]["code"] == code
    assert envelope["error"]["type"] == "server_error"
    if sync is not None:
        assert (envelope["error"]["code"], envelope["error"]["type"]) == (
            sync["code"],
            sync["type"],
        )
    assert envelope["request_id"].startswith("req-")
    assert failed["usage"]["completion_tokens"] == 0
    prompt = failed["usage"]["prompt_tokens"]
    assert 0 < prompt <= 8  # counted, not the byte bound of the prompt
    assert key_summary(key)["reserved"] == 0
