"""A batch lives in Postgres, not in a process: beat's sweep (what runs after `make
run` restarts) starts the pending prompts of running batches, records a finished
generation whose signal was lost, and leaves paused batches alone; a prompt whose
worker died is run again once by the door's own sweep (the batch lane's policy)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from batch import feeding
from batch.models import Batch
from completions import lifecycle
from completions.models import Generation
from tests.batch.conftest import upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def unconsumed(engine, settings):
    # Generations are queued to a queue no worker reads: this test plays the worker.
    settings.WEFT_GENERATION_QUEUE = "batch-tests-unconsumed"
    settings.WEFT_BATCH_CONCURRENCY = 2


def test_it_resumes_feeding_after_a_restart(unconsumed, client, make_user):
    user = make_user()
    client.force_login(user)
    assert upload(client, "one\ntwo\nthree\nfour\nfive\n", "five.txt").status_code == 302
    batch = Batch.objects.get(owner=user)
    # The web process only asked for feeding (the on-commit message of a test
    # transaction never goes out): nothing runs until a feeder does.
    assert batch.items.filter(state="pending").count() == 5

    assert feeding.sweep() == {"recorded": 0, "failed": 0, "started": 2}
    first, second = batch.items.filter(state="active").order_by("index")
    assert (first.index, second.index) == (0, 1)
    assert feeding.sweep()["started"] == 0  # the bound: 2 in flight

    # The worker finished item 0 but its signal never ran (the process died right after).
    Generation.objects.filter(pk=first.generation_id).update(
        state="done", choices=[{"index": 0, "text": " done", "finish_reason": "length"}],
        usage={"prompt_tokens": 1, "completion_tokens": 1},
    )  # fmt: skip
    # Item 1's worker was killed mid-stream: the door's stale sweep runs it again (the
    # batch lane gives a prompt two attempts), under the same generation.
    stale = timezone.now() - timedelta(minutes=5)
    Generation.objects.filter(pk=second.generation_id).update(
        state="running", attempts=1, updated_at=stale
    )
    assert lifecycle.recover_stale() == {"requeued": 1, "ended": 0}
    assert feeding.sweep() == {"recorded": 1, "failed": 0, "started": 1}
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == "done" and first.samples[0]["text"] == " done"
    assert second.state == "active" and Generation.objects.get(pk=second.generation_id).state == (
        "queued"
    )
    assert set(batch.items.filter(state="active").values_list("index", flat=True)) == {1, 2}
    # Its second worker dies too: then it has failed for good.
    Generation.objects.filter(pk=second.generation_id).update(
        state="running", attempts=2, updated_at=stale
    )
    assert lifecycle.recover_stale() == {"requeued": 0, "ended": 1}
    assert feeding.sweep() == {"recorded": 1, "failed": 0, "started": 1}  # slot: item 3
    second.refresh_from_db()
    assert (second.state, second.error_code) == ("failed", "worker_lost")

    # A paused batch is not fed by the sweep; resuming it is.
    batch.pause()
    for item in batch.items.filter(state="active"):
        Generation.objects.filter(pk=item.generation_id).update(state="failed", error_code="x")
    assert feeding.sweep()["started"] == 0
    assert batch.items.filter(state="pending").count() == 1
    batch.resume()
    assert feeding.sweep()["started"] == 1
    assert set(batch.items.values_list("state", flat=True)) == {"done", "failed", "active"}
