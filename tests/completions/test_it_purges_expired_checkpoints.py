from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from completions.models import Generation
from completions.tasks import expire_runs

pytestmark = pytest.mark.django_db


def test_it_deletes_checkpoints_seven_days_old(make_user):
    user = make_user()
    now = timezone.now()
    old = Generation.objects.create(
        owner=user,
        kind="workbench",
        params={},
        state="done",
        created_at=now - timedelta(days=7, seconds=1),
    )
    fresh = Generation.objects.create(
        owner=user, kind="workbench", params={}, state="done", created_at=now - timedelta(days=6)
    )
    running = Generation.objects.create(
        owner=user, kind="loom", params={}, state="running", created_at=now - timedelta(days=8)
    )
    assert old.expires_at == old.created_at + timedelta(days=7)
    assert expire_runs()["deleted"] == 1
    assert set(Generation.objects.values_list("pk", flat=True)) == {fresh.pk, running.pk}
    assert list(Generation.objects.recoverable(user)) == [fresh]


def test_it_has_beat_run_the_purge_and_the_stale_sweep():
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {
        "completions.tasks.expire_runs",
        "completions.tasks.recover_stale_runs",
        "completions.tasks.resend_lost_runs",
    } <= tasks
