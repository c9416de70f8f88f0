"""Deleting a queued or running Generation in the admin (its page or the bulk action)
settles its reservation first: nothing stays reserved for a row that is gone."""

import pytest
from django.utils import timezone

from completions import pipeline
from completions.budget import usage_summary
from completions.models import BudgetMonth, Generation

pytestmark = pytest.mark.django_db


def queued(user) -> Generation:
    return pipeline.start(
        user, {"model": "scripted", "prompt": [1, 2, 3], "max_tokens": 50}, kind="workbench"
    )


def running(user) -> Generation:
    generation = queued(user)
    # As a worker leaves it mid-stream: claimed, with a checkpoint of 7 tokens.
    Generation.objects.filter(pk=generation.pk).update(
        state="running",
        run_token="w1",
        started_at=timezone.now(),
        usage={"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10, "estimated": True},
    )
    return generation


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user(is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize(("make", "charged"), [(queued, 0), (running, 10)])
def test_it_settles_on_the_delete_page(
    admin_client, scripted, unconsumed_queue, make_user, make, charged
):
    user = make_user()
    generation = make(user)
    assert usage_summary(user)["reserved"] == 53
    response = admin_client.post(
        f"/admin/completions/generation/{generation.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 302
    assert not Generation.objects.filter(pk=generation.pk).exists()
    month = BudgetMonth.objects.get(user=user)
    assert (month.reserved, month.used) == (0, charged)


def test_it_settles_on_the_bulk_delete_action(admin_client, scripted, unconsumed_queue, make_user):
    user = make_user()
    rows = [queued(user), running(user), queued(user)]
    assert usage_summary(user)["reserved"] == 3 * 53
    response = admin_client.post(
        "/admin/completions/generation/",
        {"action": "delete_selected", "_selected_action": [g.pk for g in rows], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Generation.objects.filter(owner=user).exists()
    month = BudgetMonth.objects.get(user=user)
    assert (month.reserved, month.used) == (0, 10)
