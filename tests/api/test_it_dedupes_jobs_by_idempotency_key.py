"""Idempotency-Key on a job: the same key and the same body give back the same job —
no second run, no second reservation or charge; the same key with another body is a 422
idempotency_key_reused; the key is scoped to the API key that used it."""

import httpx
import pytest

from completions.budget import key_summary
from completions.models import Generation
from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Once upon a time", "max_tokens": 5, "seed": 1}


def client(api: str, secret: str) -> httpx.Client:
    return httpx.Client(base_url=api, headers={"Authorization": f"Bearer {secret}"}, timeout=15)


def test_it_gives_back_the_same_job_and_charges_once(jobs_api, make_key):
    api, backend = jobs_api
    key, secret = make_key()
    http = client(api, secret)
    headers = {**ASYNC, "Idempotency-Key": "run-42"}
    first = http.post("/completions", json=BODY, headers=headers)
    assert first.status_code == 202, first.text
    done = harvest_until(http, f"/harvest/{first.json()['id']}", {"succeeded"})
    # The same body, keys in another order: the same job, already finished.
    again = http.post("/completions", json=dict(reversed(BODY.items())), headers=headers)
    assert again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["status"] == "succeeded"
    assert again.json()["result"] == done["result"]
    assert again.headers["location"] == first.headers["location"]
    assert len(backend.requests()) == 1
    assert Generation.objects.filter(kind="job").filter(key=key).count() == 1
    summary = key_summary(key)
    assert summary["used"] == done["result"]["usage"]["total_tokens"]
    assert summary["reserved"] == 0


def test_it_refuses_the_same_key_with_another_body(jobs_api, make_key):
    api, backend = jobs_api
    key, secret = make_key()
    http = client(api, secret)
    headers = {**ASYNC, "Idempotency-Key": "run-43"}
    first = http.post("/completions", json=BODY, headers=headers)
    assert first.status_code == 202
    other = http.post("/completions", json={**BODY, "seed": 2}, headers=headers)
    assert other.status_code == 422
    error = other.json()["error"]
    assert error["code"] == "idempotency_key_reused"
    assert error["param"] == "Idempotency-Key"
    assert error["job_id"] == first.json()["id"]
    assert other.json()["request_id"] == other.headers["x-request-id"]
    harvest_until(http, f"/harvest/{first.json()['id']}", {"succeeded"})
    assert Generation.objects.filter(kind="job").filter(key=key).count() == 1
    assert key_summary(key)["reserved"] == 0


def test_it_scopes_the_idempotency_key_to_the_api_key(jobs_api, make_key, make_user):
    api, _ = jobs_api
    user = make_user()
    _, one = make_key(user=user)
    _, two = make_key(user=user)
    headers = {**ASYNC, "Idempotency-Key": "shared"}
    a = client(api, one).post("/completions", json=BODY, headers=headers)
    b = client(api, two).post("/completions", json=BODY, headers=headers)
    assert a.status_code == b.status_code == 202
    assert a.json()["id"] != b.json()["id"]


@pytest.mark.parametrize("value", ["", "x" * 256, "naïve", "a\tb"])
def test_it_refuses_a_malformed_idempotency_key(jobs_api, api_key, value):
    api, backend = jobs_api
    answer = client(api, api_key()).post(
        "/completions", json=BODY, headers={**ASYNC, "Idempotency-Key": value.encode()}
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "Idempotency-Key"
    assert backend.requests() == []


def test_it_makes_one_job_of_concurrent_submissions(jobs_api, make_key):
    import concurrent.futures

    api, backend = jobs_api
    key, secret = make_key()
    headers = {**ASYNC, "Idempotency-Key": "all-at-once", "Authorization": f"Bearer {secret}"}
    body = {**BODY, "seed": 99}

    def submit(_: int) -> httpx.Response:
        return httpx.post(f"{api}/completions", json=body, headers=headers, timeout=30)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(submit, range(8)))
    assert [a.status_code for a in answers] == [202] * 8, [a.text for a in answers]
    assert len({a.json()["id"] for a in answers}) == 1
    http = client(api, secret)
    done = harvest_until(http, f"/harvest/{answers[0].json()['id']}", {"succeeded"})
    assert Generation.objects.filter(kind="job").filter(key=key).count() == 1
    assert len([r for r in backend.requests() if r["body"].get("seed") == 99]) == 1
    summary = key_summary(key)
    assert (summary["used"], summary["reserved"]) == (done["result"]["usage"]["total_tokens"], 0)
