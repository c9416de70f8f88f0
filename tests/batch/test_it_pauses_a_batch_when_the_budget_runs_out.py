"""The budget can run out mid-batch (other runs spent it): the prompt that no longer
fits is not sent, the batch pauses and says why, and resumes once it fits again."""

import pytest

from batch import feeding
from batch.models import Batch
from completions.models import BudgetMonth, Generation, TokenBudget
from tests.batch.conftest import upload

pytestmark = pytest.mark.django_db


def test_it_pauses_a_batch_when_the_budget_runs_out(engine, client, make_user, settings):
    settings.WEFT_GENERATION_QUEUE = "batch-tests-unconsumed"  # this test plays the worker
    settings.WEFT_BATCH_CONCURRENCY = 4
    user = make_user()
    client.force_login(user)
    TokenBudget.objects.create(user=user, monthly_tokens=10_000)
    assert upload(client, "a\nb\nc\nd\n", "four.txt", max_tokens="100").status_code == 302
    batch = Batch.objects.get(owner=user)
    per_prompt = batch.items.first().prompt_tokens + 100
    # Spent elsewhere meanwhile: two prompts' worth is left.
    TokenBudget.objects.filter(user=user).update(monthly_tokens=2 * per_prompt + 5)

    assert feeding.sweep()["started"] == 2
    batch.refresh_from_db()
    assert batch.state == "paused"
    assert batch.pause_reason.startswith("The budget ran out:")
    assert "The largest max_tokens that fits is" in batch.pause_reason
    assert batch.items.filter(state="pending").count() == 2
    assert Generation.objects.filter(owner=user).count() == 2  # nothing sent for the rest
    assert BudgetMonth.objects.get(user=user).reserved == 2 * per_prompt
    page = client.get(f"/batch/{batch.pk}/").content.decode()
    assert "The budget ran out" in page and ">Resume</button>" in page

    TokenBudget.objects.filter(user=user).update(monthly_tokens=10_000)
    client.post(f"/batch/{batch.pk}/resume/", HTTP_HX_REQUEST="true")
    assert feeding.sweep()["started"] == 2
    batch.refresh_from_db()
    assert batch.state == "running" and batch.pause_reason == ""
