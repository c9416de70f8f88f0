"""The connection drops while jobs.create commits: the commit landed but its answer was
lost, so its on-commit message never went. api.db's retry finds the job made and sends
its message then — the job runs now, not after the 300 s resend sweep."""

import pytest
import redis
from django.conf import settings as django_settings
from django.db import OperationalError, connections

from api import db, jobs
from api.models import ApiRequest
from completions.models import Generation
from config import lanes

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE_PREFIX = "api-tests-commit-lost"  # no worker reads it: its messages stay to count


def messages(queue: str) -> int:
    broker = redis.Redis.from_url(django_settings.REDIS_URL)
    return sum(
        broker.llen(name) for name in broker.keys(f"{queue}*") if broker.type(name) == b"list"
    )


def test_it_sends_the_message_of_a_job_whose_commit_answer_was_lost(
    make_key, settings, monkeypatch
):
    settings.WEFT_GENERATION_QUEUE = QUEUE_PREFIX
    queue = lanes.queue_of_lane(lanes.JOBS, QUEUE_PREFIX)
    redis.Redis.from_url(django_settings.REDIS_URL).delete(queue)
    key, _ = make_key()
    ApiRequest.objects.create(
        request_id="req-commit-lost", key=key, key_prefix=key.prefix, user=key.user,
        endpoint="/v1/completions", reserved_tokens=10, settled=False,
    )  # fmt: skip
    sub = jobs.Submission(
        key=key, request_id="req-commit-lost", model="llama-8b",
        body={"model": "llama-8b", "prompt": "Hi", "max_tokens": 5}, prompt_tokens=2,
        prompt_exact=True, choice_count=1, max_tokens=5, clamped="", workload="batch",
        idempotency_key="", digest="d" * 64,
    )  # fmt: skip

    wrapper = type(connections["default"])
    commit = wrapper._commit
    dropped = []

    def commit_then_drop(self):
        commit(self)
        if not dropped:  # the first commit lands; its answer is lost
            dropped.append(True)
            raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(wrapper, "_commit", commit_then_drop)
    job, created = db._fresh(jobs.create, sub)  # what db.run runs, here in this thread

    assert dropped and created
    assert Generation.objects.filter(kind="job", key=key).count() == 1
    assert job.state == "queued"
    assert messages(queue) == 1
