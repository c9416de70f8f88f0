import pytest

from completions import pipeline
from completions.budget import BudgetRefused, usage_summary
from completions.models import Generation

pytestmark = pytest.mark.django_db


def test_it_refuses_before_sending_anything(scripted, make_user, budget_of):
    user = make_user()
    budget_of(user, 1000)
    prompt = list(range(1, 11))  # 10 prompt tokens, exactly
    with pytest.raises(BudgetRefused) as caught:
        pipeline.start(
            user,
            {"model": "scripted", "prompt": prompt, "max_tokens": 200, "n": 5},
            kind="workbench",
        )
    refusal = caught.value
    assert (refusal.asked, refusal.left, refusal.max_tokens_fit) == (
        10 + 5 * 200,
        1000,
        (1000 - 10) // 5,
    )
    assert "1,010" in refusal.message and "1,000" in refusal.message and "198" in refusal.message
    assert scripted.requests() == []
    assert not Generation.objects.exists()
    assert usage_summary(user) == {"budget": 1000, "used": 0, "reserved": 0, "remaining": 1000}


def test_it_can_record_the_refusal(scripted, make_user, budget_of):
    user = make_user()
    budget_of(user, 5)
    with pytest.raises(BudgetRefused) as caught:
        pipeline.start(
            user,
            {"model": "scripted", "prompt": "Hello", "max_tokens": 10},
            kind="loom",
            record_refusal=True,
        )
    assert caught.value.max_tokens_fit == 0
    generation = Generation.objects.get()
    assert generation.state == "refused" and generation.error_code == "budget_refused"
    assert generation.reserved_tokens == 0


def test_it_reserves_the_worst_case_when_it_fits(scripted, make_user, budget_of, unconsumed_queue):
    user = make_user()
    budget_of(user, 10_000)
    generation = pipeline.start(
        user,
        {"model": "scripted", "prompt": "Hi there", "max_tokens": 100, "n": 2},
        kind="workbench",
    )
    # "Hi there" is 9 tokens by the backend's /tokenize.
    assert generation.reserved_tokens == 9 + 2 * 100
    assert generation.state == "queued" and len(generation.choices) == 2
    assert usage_summary(user)["reserved"] == 209
    assert generation.params["model"] == "scripted"
    assert generation.params["stream"] is True
    assert generation.params["stream_options"] == {"include_usage": True}
