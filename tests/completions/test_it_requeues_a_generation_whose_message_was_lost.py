"""A generation whose Celery message was lost stays queued; the beat sweep sends it
again once, a real worker runs it, and a late duplicate delivery changes nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from completions import pipeline, tasks
from completions.models import Generation
from config import lanes
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

DATA = {"model": "scripted", "prompt": [1, 2, 3], "max_tokens": 5}


def test_it_requeues_a_lost_queued_generation_once(door_stack, scripted, settings, make_user):
    user = make_user()
    settings.WEFT_GENERATION_QUEUED_LIMIT_SECONDS = 300
    settings.WEFT_GENERATION_QUEUE = "completions-tests-lost"  # nobody reads it: lost
    generation = pipeline.start(user, DATA, kind="workbench")

    # Not yet past the limit: left alone.
    assert tasks.resend_lost_runs() == {"resent": 0, "failed": 0}

    # Its message went where nobody reads: as good as lost. The row belongs to the real
    # worker's queue, where the re-sent message goes.
    Generation.objects.filter(pk=generation.pk).update(
        created_at=timezone.now() - timedelta(seconds=301),
        queue=lanes.queue_of_lane(lanes.INTERACTIVE, "door"),
    )
    assert tasks.resend_lost_runs() == {"resent": 1, "failed": 0}
    wait_until(
        lambda: Generation.objects.get(pk=generation.pk).state == "done", 30, "the rerun done"
    )
    generation.refresh_from_db()
    assert generation.requeued_at is not None
    done = (generation.choices, generation.charged_tokens, generation.finished_at)

    # The lost message turning up after all (a double delivery) does nothing.
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    assert (generation.choices, generation.charged_tokens, generation.finished_at) == done
    assert len(scripted.requests()) == 1
    # And the sweep leaves a finished row alone.
    assert tasks.resend_lost_runs() == {"resent": 0, "failed": 0}
