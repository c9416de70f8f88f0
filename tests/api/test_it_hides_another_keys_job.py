"""A job is reachable only with the key that made it: another key (of the same user or
another user), an unknown id, or a malformed one is the same 404 job_not_found envelope,
for GET and DELETE alike; a harvest without a key is a 401."""

import httpx
import pytest

from completions.models import Generation
from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "hi", "max_tokens": 2}


def test_it_answers_404_for_someone_elses_job(jobs_api, make_key, make_user):
    api, _ = jobs_api
    owner = make_user()
    _, mine = make_key(user=owner)
    _, sibling = make_key(user=owner)
    _, stranger = make_key(user=make_user())
    job = httpx.post(
        f"{api}/completions", json=BODY, headers={**ASYNC, "Authorization": f"Bearer {mine}"}
    ).json()
    location = f"{api}/harvest/{job['id']}"
    harvest_until(
        httpx.Client(headers={"Authorization": f"Bearer {mine}"}), location, {"succeeded"}
    )
    for secret in (sibling, stranger):
        auth = {"Authorization": f"Bearer {secret}"}
        for method in ("GET", "DELETE"):
            answer = httpx.request(method, location, headers=auth)
            assert answer.status_code == 404, (method, answer.text)
            assert answer.json()["error"]["code"] == "job_not_found"
            assert answer.headers["x-request-id"] == answer.json()["request_id"]
    assert Generation.objects.filter(kind="job").get(public_id=job["id"]).state == "done"
    auth = {"Authorization": f"Bearer {stranger}"}
    for path in (
        "/harvest/job-000000000000000000000000",
        "/harvest/nonsense",
        "/harvest/%27%20or%201",
    ):
        answer = httpx.get(f"{api}{path}", headers=auth)
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "job_not_found"
    assert httpx.get(location).status_code == 401
    assert httpx.get(location).json()["error"]["code"] == "missing_api_key"
    # Nothing under the job's path but the job itself.
    answer = httpx.get(f"{location}/result", headers={"Authorization": f"Bearer {mine}"})
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    answer = httpx.put(location, headers={"Authorization": f"Bearer {mine}"})
    assert answer.status_code == 405 and answer.headers["allow"] == "GET, DELETE"
