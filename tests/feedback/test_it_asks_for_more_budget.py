"""Asking for more budget, in-process: from a refusal the form suggests what was
missing; a request is stored pending for the pages or for one of the user's keys and
listed on the Usage page; a second request while one waits (for any of the person's
budgets), a revoked key or a bad amount is refused; a pending request can be withdrawn."""

import re

import pytest

from api.models import ApiKey
from feedback.models import BudgetRequest

pytestmark = pytest.mark.django_db


def test_it_suggests_what_the_refused_run_lacked(client, make_user):
    client.force_login(make_user())
    page = client.get("/budget/request/?asked=1500&left=100").content.decode()
    assert re.search(r'name="amount" value="1400"', page)
    assert "now 2000000 tokens a month" in page
    page = client.get("/budget/request/?asked=x").content.decode()
    assert re.search(r'name="amount"(?! value)', page)


def test_it_stores_a_request_and_shows_its_answer_on_the_usage_page(client, make_user):
    user = make_user()
    key, _ = ApiKey.objects.create_key(user, "scripts")
    client.force_login(user)
    response = client.post("/budget/request/", {"amount": "1000", "reason": "an eval run"})
    assert response.status_code == 302 and response["Location"] == "/usage/"
    (pages,) = BudgetRequest.objects.all()
    assert (pages.key, pages.amount, pages.state) == (None, 1000, "pending")
    usage = client.get("/usage/").content.decode()
    assert f'id="budget-request-{pages.pk}"' in usage and "the pages" in usage

    # One waits at a time per person, for the same budget or another.
    for data in ({"amount": "9", "reason": "more"}, {"key": key.pk, "amount": "5", "reason": "s"}):
        again = client.post("/budget/request/", data)
        page = again.content.decode()
        assert again.status_code == 400 and "request waiting already (for the pages)" in page
    assert client.post(f"/budget/requests/{pages.pk}/withdraw/").status_code == 302
    pages.refresh_from_db()
    assert pages.state == "withdrawn"
    response = client.post("/budget/request/", {"key": key.pk, "amount": "5000", "reason": "sweep"})
    assert response.status_code == 302
    for_key = BudgetRequest.objects.get(state="pending")
    assert (for_key.key, for_key.amount, for_key.reason) == (key, 5000, "sweep")
    usage = client.get("/usage/").content.decode()
    assert f"API key {key.prefix}…" in usage and usage.count('badge pending">pending<') == 1


@pytest.mark.parametrize("amount", ["0", "-5", "abc", "1e3", str(10**12 + 1), ""])
def test_it_refuses_an_amount_that_is_not_a_positive_whole_number(client, make_user, amount):
    client.force_login(make_user())
    response = client.post("/budget/request/", {"amount": amount, "reason": "more"})
    assert response.status_code == 400 and 'role="alert"' in response.content.decode()
    assert not BudgetRequest.objects.exists()


def test_it_refuses_a_revoked_key(client, make_user):
    user = make_user()
    key, _ = ApiKey.objects.create_key(user, "old")
    key.revoke()
    client.force_login(user)
    response = client.post("/budget/request/", {"key": key.pk, "amount": "10", "reason": "x"})
    assert response.status_code == 400 and "revoked" in response.content.decode()
    assert not BudgetRequest.objects.exists()
