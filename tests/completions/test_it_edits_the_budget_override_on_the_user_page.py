import pytest

from completions.budget import monthly_budget

pytestmark = pytest.mark.django_db


def test_it_edits_the_budget_override_on_the_user_page(client, make_user, settings):
    admin = make_user(is_staff=True, is_superuser=True)
    writer = make_user()
    client.force_login(admin)
    url = f"/admin/auth/user/{writer.pk}/change/"
    page = client.get(url).content.decode()
    assert "monthly token budget override" in page.lower()
    assert "token_budget-0-monthly_tokens" in page
    assert monthly_budget(writer) == settings.WEFT_MONTHLY_TOKEN_BUDGET

    form = {
        "username": writer.username,
        "is_active": "on",
        "date_joined_0": "2026-11-01",
        "date_joined_1": "00:00:00",
        "token_budget-TOTAL_FORMS": "1",
        "token_budget-INITIAL_FORMS": "0",
        "token_budget-MIN_NUM_FORMS": "0",
        "token_budget-MAX_NUM_FORMS": "1",
        "token_budget-0-monthly_tokens": "12345",
        "token_budget-0-user": str(writer.pk),
    }
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert monthly_budget(writer) == 12345
