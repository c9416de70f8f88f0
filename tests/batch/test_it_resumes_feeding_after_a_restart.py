"""A batch lives in Postgres, not in a process: beat's sweep (what runs after `make
run` restarts) starts the pending prompts of running batches, records a finished
generation whose signal was lost, sends a prompt whose worker died once more, and
leaves paused batches alone."""

import pytest
from django.db import transaction

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
    assert upload(client, "one\ntwo\nthree\nfour\n", "four.txt").status_code == 302
    batch = Batch.objects.get(owner=user)
    # The web process only asked for feeding (the on-commit message of a test
    # transaction never goes out): nothing runs until a feeder does.
    assert batch.items.filter(state="pending").count() == 4

    assert feeding.sweep() == {"recorded": 0, "failed": 0, "started": 2}
    first, second = batch.items.filter(state="active").order_by("index")
    assert (first.index, second.index) == (0, 1)
    assert feeding.sweep()["started"] == 0  # the bound: 2 in flight

    # The worker finished item 0 but its signal never ran (the process died right after).
    Generation.objects.filter(pk=first.generation_id).update(
        state="done", choices=[{"index": 0, "text": " done", "finish_reason": "length"}],
        usage={"prompt_tokens": 1, "completion_tokens": 1},
    )  # fmt: skip
    # Item 1's worker was killed mid-stream: the door marks it interrupted (worker_lost).
    second_gen = Generation.objects.get(pk=second.generation_id)
    Generation.objects.filter(pk=second_gen.pk).update(state="running")
    with transaction.atomic():
        lifecycle.finish(second_gen, "interrupted", run_token=None, error_code="worker_lost")
    # (finish's on-commit signal does not run inside a test transaction either)
    assert feeding.sweep() == {"recorded": 2, "failed": 0, "started": 2}
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == "done" and first.samples[0]["text"] == " done"
    assert second.state == "active" and second.attempts == 2  # sent again, once
    assert set(batch.items.filter(state="active").values_list("index", flat=True)) == {1, 2}

    # A paused batch is not fed by the sweep; resuming it is.
    batch.pause()
    for item in batch.items.filter(state="active"):
        Generation.objects.filter(pk=item.generation_id).update(state="failed", error_code="x")
    assert feeding.sweep()["started"] == 0
    assert batch.items.filter(state="pending").count() == 1
    batch.resume()
    assert feeding.sweep()["started"] == 1
    assert set(batch.items.values_list("state", flat=True)) == {"done", "failed", "active"}
