"""Someone else's feedback, budget request or API key is a 404, not a 403, on every
view that names one; lists show the user's own only."""

import pytest

from api.models import ApiKey
from feedback.models import BudgetRequest, Feedback

pytestmark = pytest.mark.django_db


def test_it_answers_404_for_someone_elses_rows(client, make_user):
    owner, intruder = make_user(), make_user()
    item = Feedback.objects.create(owner=owner, message="mine alone")
    asked = BudgetRequest.objects.create(owner=owner, amount=500, reason="the owners reason")
    key, _ = ApiKey.objects.create_key(owner, "owner's key")
    client.force_login(intruder)
    assert client.get(f"/feedback/{item.pk}/").status_code == 404
    assert "mine alone" not in client.get("/feedback/").content.decode()
    assert client.post(f"/budget/requests/{asked.pk}/withdraw/").status_code == 404
    assert client.get(f"/budget/request/?key={key.pk}").status_code == 404
    response = client.post("/budget/request/", {"key": key.pk, "amount": "5", "reason": "x"})
    assert response.status_code == 404
    assert "the owners reason" not in client.get("/usage/").content.decode()
    asked.refresh_from_db()
    assert asked.state == "pending" and BudgetRequest.objects.count() == 1

    client.force_login(owner)
    assert client.get(f"/feedback/{item.pk}/").status_code == 200
    assert "the owners reason" in client.get("/usage/").content.decode()
