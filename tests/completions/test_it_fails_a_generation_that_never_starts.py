"""A generation still queued a limit after the sweep re-sent it is failed as
never_started and its reservation released; a message arriving later does nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from completions import pipeline, tasks
from completions.budget import usage_summary
from completions.models import Generation

pytestmark = pytest.mark.django_db(transaction=True)

DATA = {"model": "scripted", "prompt": [1, 2, 3], "max_tokens": 5}


def test_it_fails_a_generation_no_worker_ever_starts(
    scripted, settings, make_user, unconsumed_queue
):
    user = make_user()
    settings.WEFT_GENERATION_QUEUED_LIMIT_SECONDS = 300
    generation = pipeline.start(user, DATA, kind="workbench")
    assert usage_summary(user)["reserved"] > 0
    long_ago = timezone.now() - timedelta(seconds=301)

    Generation.objects.filter(pk=generation.pk).update(created_at=long_ago)
    assert tasks.resend_lost_runs() == {"resent": 1, "failed": 0}
    # Re-sent to a queue nobody reads: lost again. Within the second limit, it waits.
    assert tasks.resend_lost_runs() == {"resent": 0, "failed": 0}
    generation.refresh_from_db()
    assert generation.state == "queued"

    Generation.objects.filter(pk=generation.pk).update(requeued_at=long_ago)
    assert tasks.resend_lost_runs() == {"resent": 0, "failed": 1}
    generation.refresh_from_db()
    assert generation.state == "failed"
    assert generation.error_code == "never_started"
    assert generation.charged_tokens == 0
    assert generation.reserved_tokens == 0
    assert usage_summary(user)["reserved"] == 0
    assert usage_summary(user)["used"] == 0

    # A message delivered after all finds the row finished and leaves it.
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    assert generation.state == "failed"
    assert scripted.requests() == []
    assert tasks.resend_lost_runs() == {"resent": 0, "failed": 0}
