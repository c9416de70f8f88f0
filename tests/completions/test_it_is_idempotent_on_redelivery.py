import pytest
from django.utils import timezone

from completions import pipeline
from completions.budget import usage_summary
from completions.models import Generation

pytestmark = pytest.mark.django_db(transaction=True)

DATA = {"model": "scripted", "prompt": [1, 2, 3], "max_tokens": 5}


def test_it_ignores_a_second_delivery_of_a_finished_run_does_nothing(
    scripted, make_user, unconsumed_queue
):
    user = make_user()
    generation = pipeline.start(user, DATA, kind="workbench")
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    first = (generation.choices, generation.charged_tokens, generation.finished_at)
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    assert (generation.choices, generation.charged_tokens, generation.finished_at) == first
    assert len(scripted.requests()) == 1
    assert usage_summary(user)["used"] == 8


def test_it_ignores_a_delivery_while_another_worker_streams_does_nothing(
    scripted, make_user, unconsumed_queue
):
    user = make_user()
    generation = pipeline.start(user, DATA, kind="workbench")
    Generation.objects.filter(pk=generation.pk).update(
        state="running", run_token="other", updated_at=timezone.now()
    )
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    assert generation.state == "running" and generation.run_token == "other"
    assert scripted.requests() == []
