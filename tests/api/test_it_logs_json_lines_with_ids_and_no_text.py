"""WEFT_LOG_FORMAT=json: the web process and the worker log JSON lines, each with the
ids of what it is about — a /v1 request's id (its X-Request-Id), key prefix and user,
a page request's id, a job's run — and never the prompt or the completion."""

import json
import secrets

import httpx
import pytest

from tests.api.conftest import ASYNC, JOBS_ENV, harvest_until, proxy_env_for
from tests.support import Supervisor, free_port, start_web, start_worker, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "words nobody may log " + secrets.token_hex(8)


def json_lines(path) -> list[dict]:
    """The log's JSON lines; Celery's start-up banner (printed, not logged) aside."""
    lines = []
    for raw in path.read_text().splitlines():
        if raw.startswith("{"):
            lines.append(json.loads(raw))
    return lines


def test_it_tags_each_line_with_its_ids(proxy_engine, make_key, tmp_path):
    env = proxy_env_for(proxy_engine, **{**JOBS_ENV, "WEFT_GENERATION_QUEUE": "logs-json",
                                         "WEFT_LOG_FORMAT": "json"})  # fmt: skip
    key, secret = make_key()
    auth = {"Authorization": f"Bearer {secret}"}
    sup = Supervisor()
    web_log = tmp_path / "web.log"
    try:
        with web_log.open("wb") as out:
            base = start_web(sup, env, free_port(), log=out)
            start_worker(sup, env, tmp_path / "worker.log", concurrency=1)
            body = {"model": "llama-8b", "prompt": PROMPT, "max_tokens": 6}
            answer = httpx.post(f"{base}/v1/completions", json=body, headers=auth, timeout=30)
            assert answer.status_code == 200
            completion = answer.json()["choices"][0]["text"]
            job = httpx.post(f"{base}/v1/completions", json=body, headers={**auth, **ASYNC},
                             timeout=30)  # fmt: skip
            assert job.status_code == 202, job.text
            with httpx.Client(base_url=base, headers=auth) as http:
                done = harvest_until(http, job.headers["location"], {"succeeded"})
            ready = httpx.get(f"{base}/health/ready", timeout=30)
            wait_until(lambda: answer.headers["x-request-id"] in web_log.read_text(), 10, "log")
    finally:
        sup.stop_all()

    web = json_lines(web_log)
    assert web and all({"time", "level", "logger", "message"} <= set(line) for line in web)
    tagged = [line for line in web if line.get("request_id") == answer.headers["x-request-id"]]
    (request,) = tagged
    assert request["key_prefix"] == key.prefix and request["user_id"] == key.user_id
    assert request["logger"] == "api.proxy" and "status=200" in request["message"]
    assert not [line for line in web if line["logger"] == "uvicorn.access"]
    # A page request's lines carry its X-Request-Id (readiness logs what is down, if any).
    assert ready.headers["x-request-id"].startswith("req-")
    worker = json_lines(tmp_path / "worker.log")
    job_lines = [line for line in worker if line.get("run_id", "").startswith("job-")]
    assert job_lines, worker[-5:]
    everything = web_log.read_text() + (tmp_path / "worker.log").read_text()
    assert PROMPT not in everything and completion not in everything
    assert done["result"]["choices"][0]["text"] not in everything
    assert secret not in everything
