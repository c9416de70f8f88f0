"""A Batch row offers "Loom tree" (the prompt and its samples as a new tree) only once
it has samples: a row still pending has nothing to branch from yet."""

import pytest

from batch.models import Batch, BatchItem

pytestmark = pytest.mark.django_db


def test_it_offers_a_loom_tree_only_for_rows_with_samples(client, make_user):
    user = make_user()
    batch = Batch.objects.create(owner=user, title="b", params={"model": "scripted", "max_tokens": 2},
                                 total=2, state="running")  # fmt: skip
    done = BatchItem.objects.create(batch=batch, index=0, line=1, prompt="x", state="done",
                                    samples=[{"text": " y", "finish_reason": "length",
                                              "tokens": 1, "mean_logprob": -0.5}])  # fmt: skip
    pending = BatchItem.objects.create(batch=batch, index=1, line=2, prompt="z", state="pending")
    client.force_login(user)
    page = client.get(f"/batch/{batch.pk}/").content.decode()
    assert f"/batch/{batch.pk}/{done.pk}/loom/" in page
    assert f"/batch/{batch.pk}/{pending.pk}/loom/" not in page
