"""The seed's Privacy section, with a moved clock and beat's own task: a job queued for
24 h expires (its reservation given back, never run); a finished job's request and
result content is deleted 24 h after it ended (it then reads `expired`, and its
Idempotency-Key still gives it back rather than running it again); the compact row goes
7 days after completion — but not while its accounting is unresolved."""

from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.utils import timezone

from api.models import ApiRequest
from completions.budget import key_summary
from completions.models import Generation
from completions.tasks import expire_runs as expire_completion_jobs
from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Remember me", "max_tokens": 3}


@pytest.fixture
def clock(monkeypatch):
    """move(timedelta): from now on, timezone.now() is that far ahead."""
    real = timezone.now

    def move(by: timedelta) -> None:
        monkeypatch.setattr(timezone, "now", lambda: real() + by)

    return move


def test_it_has_beat_expire_jobs():
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"completions.tasks.expire_runs", "completions.tasks.recover_stale_runs"} <= tasks


def test_it_deletes_content_after_a_day_and_the_row_after_a_week(jobs_api, make_key, clock):
    api, backend = jobs_api
    key, secret = make_key()
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    headers = {**ASYNC, "Idempotency-Key": "keep-a-day"}
    job = http.post("/completions", json=BODY, headers=headers).json()
    done = harvest_until(http, f"/harvest/{job['id']}", {"succeeded"})
    assert done["expires_at"] == done["finished_at"] + 24 * 3600

    clock(timedelta(hours=23, minutes=59))
    assert expire_completion_jobs()["content"] == 0
    assert http.get(f"/harvest/{job['id']}").json()["status"] == "succeeded"

    clock(timedelta(hours=24, minutes=1))
    assert expire_completion_jobs()["content"] == 1
    row = Generation.objects.filter(kind="job").get(public_id=job["id"])
    assert (row.params, row.result_token, row.error_detail) == ({}, "", None)
    assert not row.chunks.exists()
    expired = http.get(f"/harvest/{job['id']}").json()
    assert expired["status"] == "expired"
    assert expired["expired_from"] == "succeeded"
    assert "result" not in expired
    assert expired["usage"] == done["usage"]  # accounting metadata stays
    # Deduplication metadata stays too: the same key and body is still this job.
    again = http.post("/completions", json=BODY, headers=headers)
    assert again.json()["id"] == job["id"] and again.json()["status"] == "expired"
    assert len(backend.requests()) == 1

    clock(timedelta(days=7, hours=1))
    assert expire_completion_jobs()["deleted"] >= 1
    assert not Generation.objects.filter(kind="job").filter(public_id=job["id"]).exists()
    assert http.get(f"/harvest/{job['id']}").json()["error"]["code"] == "job_not_found"
    assert ApiRequest.objects.filter(pk=row.api_request_id).exists()  # request metadata


def test_it_expires_a_job_queued_for_a_day(proxy, make_key, clock):
    # proxy's server sends jobs to a queue no worker reads: they stay queued.
    api, backend = proxy
    key, secret = make_key()
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    job = http.post("/completions", json=BODY, headers=ASYNC).json()
    assert job["status"] == "queued"
    assert job["expires_at"] == job["created_at"] + 24 * 3600
    assert key_summary(key)["reserved"] > 0

    clock(timedelta(hours=24, minutes=1))
    assert expire_completion_jobs()["queued"] == 1
    expired = http.get(f"/harvest/{job['id']}").json()
    assert (expired["status"], expired["expired_from"]) == ("expired", "queued")
    assert expired["usage"]["charged_tokens"] == 0
    assert Generation.objects.filter(kind="job").get(public_id=job["id"]).params == {}
    assert key_summary(key)["reserved"] == 0
    assert backend.requests() == []


def test_it_keeps_the_row_while_accounting_is_unresolved(proxy, make_key, clock):
    api, _ = proxy
    key, secret = make_key()
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    job = http.post("/completions", json=BODY, headers=ASYNC).json()
    row = Generation.objects.filter(kind="job").get(public_id=job["id"])
    clock(timedelta(hours=25))
    expire_completion_jobs()
    Generation.objects.filter(pk=row.pk).update(settled_at=None)  # e.g. a bug
    clock(timedelta(days=30))
    expire_completion_jobs()
    assert Generation.objects.filter(kind="job").filter(pk=row.pk).exists()
    Generation.objects.filter(pk=row.pk).update(settled_at=timezone.now())
    expire_completion_jobs()
    assert not Generation.objects.filter(kind="job").filter(pk=row.pk).exists()
