"""Feedback and budget requests can each mail staff: a person sends at most
WEFT_FEEDBACK_PER_DAY of them a day (UTC, counted together), with a clear message, and
another person is unaffected; a second pending budget request is refused by the
database itself, not only by the form."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from feedback.models import BudgetRequest, Feedback

pytestmark = pytest.mark.django_db


def _feedback(client, text: str = "it broke"):
    return client.post("/feedback/new/", {"message": text, "page_url": "/", "request_id": ""})


def test_it_refuses_feedback_past_the_days_quota_for_that_person_only(client, make_user, settings):
    settings.WEFT_FEEDBACK_PER_DAY = 3
    loud, quiet = make_user(), make_user()
    # Yesterday's do not count.
    old = Feedback.objects.create(owner=loud, message="old")
    Feedback.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=1))
    client.force_login(loud)
    assert [_feedback(client).status_code for _ in range(3)] == [302, 302, 302]
    refused = _feedback(client)
    assert refused.status_code == 400
    assert "You have sent 3 messages and requests today, the most a day" in refused.content.decode()
    assert Feedback.objects.for_user(loud).count() == 4
    # A budget request counts too.
    refused = client.post("/budget/request/", {"amount": "10", "reason": "more"})
    assert refused.status_code == 400 and "the most a day" in refused.content.decode()
    assert not BudgetRequest.objects.exists()

    client.force_login(quiet)
    assert _feedback(client).status_code == 302
    assert client.post("/budget/request/", {"amount": "10", "reason": "more"}).status_code == 302


def test_it_refuses_a_second_pending_request_in_the_database(make_user):
    user = make_user()
    BudgetRequest.objects.create(owner=user, amount=10, reason="a")
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetRequest.objects.create(owner=user, amount=20, reason="b")
    BudgetRequest.objects.create(owner=user, amount=30, reason="c", state="declined")
    BudgetRequest.objects.create(owner=make_user(), amount=10, reason="another person")
    assert BudgetRequest.objects.pending().count() == 2
