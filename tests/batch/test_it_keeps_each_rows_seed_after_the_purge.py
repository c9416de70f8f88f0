"""Each Batch row keeps the request its prompt was sent with (the drawn seed and every
setting), so the export still carries them once the door's checkpoint is purged after
7 days; a row not sent yet shows the batch's own settings."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from batch import feeding
from batch.models import Batch
from completions.models import Generation
from completions.tasks import expire_runs
from tests.batch.conftest import upload

pytestmark = pytest.mark.django_db


def test_it_exports_the_seed_sent_after_the_run_is_gone(engine, settings, client, make_user):
    settings.WEFT_GENERATION_QUEUE = "batch-tests-unconsumed"  # this test plays the worker
    settings.WEFT_BATCH_CONCURRENCY = 1
    user = make_user()
    client.force_login(user)
    assert upload(client, "first\nsecond\n", "two.txt", temperature="0.7").status_code == 302
    batch = Batch.objects.get(owner=user)
    assert feeding.sweep()["started"] == 1
    item = batch.items.get(index=0)
    run = item.generation
    seed = run.params["seed"]  # drawn by the door, sent, recorded
    assert isinstance(seed, int) and item.sent["seed"] == seed and "prompt" not in item.sent
    Generation.objects.filter(pk=run.pk).update(
        state="done", expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert expire_runs()["deleted"] == 1
    lines = [json.loads(line) for line in
             b"".join(client.get(f"/batch/{batch.pk}/export.jsonl").streaming_content).splitlines()]  # fmt: skip
    assert [line["seed"] for line in lines] == [seed, None]
    assert lines[0]["settings"]["temperature"] == 0.7
    assert lines[1]["settings"] == batch.params
