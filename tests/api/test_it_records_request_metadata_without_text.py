"""Each /v1 request leaves a metadata row (key prefix, user, IP, endpoint, model, token
counts, status, latency, workload) — never prompt or completion text — and the Usage
page shows them per key."""

import httpx
import pytest

from api.models import ApiRequest
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "Quixotic-marmalade-prompt"


def test_it_records_metadata_and_the_workload(proxy, make_key, make_user, client):
    base, backend = proxy
    user = make_user()
    key, secret = make_key(user=user)
    auth = {"Authorization": f"Bearer {secret}"}
    body = {"model": "llama-8b", "prompt": PROMPT, "max_tokens": 4}
    done = httpx.post(f"{base}/completions", json=body, headers={**auth, "X-Acs-Workload": "batch"})
    odd = httpx.post(f"{base}/completions", json=body, headers={**auth, "X-Acs-Workload": "urgent"})
    bad = httpx.post(f"{base}/completions", json={**body, "top_p": 0}, headers=auth)
    assert (done.status_code, odd.status_code, bad.status_code) == (200, 200, 400)
    assert backend.requests()[0]["headers"]["x-acs-workload"] == "batch"
    assert "x-acs-workload" not in backend.requests()[1]["headers"]

    def three_rows():
        rows = list(ApiRequest.objects.filter(key=key, settled=True).order_by("id"))
        return rows if len(rows) == 3 else None

    rows = wait_until(three_rows, 10, "three rows")
    first, second, third = rows
    usage = done.json()["usage"]
    assert (first.key_prefix, first.user, first.ip, first.endpoint) == (
        key.prefix, user, "127.0.0.1", "/v1/completions")  # fmt: skip
    assert (first.model, first.served_model, first.status, first.workload) == (
        "llama-8b", "weft/scripted-tiny", 200, "batch")  # fmt: skip
    assert (first.prompt_tokens, first.completion_tokens) == (
        usage["prompt_tokens"], usage["completion_tokens"])  # fmt: skip
    assert first.latency_ms is not None and first.request_id == done.headers["x-request-id"]
    assert second.workload == ""  # an unknown value is ignored
    assert (third.status, third.error_code, third.completion_tokens) == (400, "invalid_request", 0)
    text = done.json()["choices"][0]["text"].strip()
    for row in rows:
        values = " ".join(str(getattr(row, f.attname)) for f in row._meta.concrete_fields)
        assert PROMPT not in values and text not in values

    client.force_login(user)
    page = client.get("/usage/").content.decode()
    assert key.prefix in page and done.headers["x-request-id"] in page
    assert PROMPT not in page and text not in page
