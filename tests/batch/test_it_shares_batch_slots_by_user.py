"""WEFT_BATCH_CONCURRENCY slots go round the users with running batches, then round each
user's batches: a user with three batches gets no more slots than a user with one."""

import pytest

from batch import feeding
from batch.models import BatchItem
from tests.batch.conftest import upload

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_gives_each_user_an_equal_share(engine, settings, client, make_user):
    settings.WEFT_GENERATION_QUEUE = "batch-tests-unconsumed"  # this test plays the worker
    settings.WEFT_BATCH_CONCURRENCY = 4
    many, one = make_user(), make_user()
    client.force_login(many)
    for i in range(3):
        assert upload(client, "a\nb\nc\nd\n", f"many-{i}.txt").status_code == 302
    client.force_login(one)
    assert upload(client, "a\nb\nc\nd\n", "one.txt").status_code == 302

    assert feeding.sweep()["started"] == 4
    active = BatchItem.objects.filter(state="active")
    by_user = {u.pk: active.filter(batch__owner=u).count() for u in (many, one)}
    assert by_user == {many.pk: 2, one.pk: 2}
    # And the user with three batches has its two slots on two different batches.
    assert active.filter(batch__owner=many).values("batch").distinct().count() == 2
