"""The admin edits a key's monthly budget override (empty: the setting) and its
name; it never shows the secret or its hash, and cannot make keys (no place to show
a secret once)."""

import pytest

pytestmark = pytest.mark.django_db


def test_it_sets_and_clears_the_override(client, make_user, make_key, settings):
    settings.WEFT_API_KEY_MONTHLY_BUDGET = 7000
    key, secret = make_key(name="shared")
    client.force_login(make_user(is_staff=True, is_superuser=True))
    url = f"/admin/api/apikey/{key.pk}/change/"
    page = client.get(url).content.decode()
    assert 'name="monthly_budget"' in page and key.prefix in page
    assert secret.split(".")[1] not in page and key.secret_hash not in page

    response = client.post(
        url, {"name": "shared", "monthly_budget": "123456", "revoked_at_0": "", "revoked_at_1": ""}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    key.refresh_from_db()
    assert key.monthly_budget == 123456 and key.budget_tokens() == 123456

    client.post(
        url, {"name": "shared", "monthly_budget": "", "revoked_at_0": "", "revoked_at_1": ""}
    )
    key.refresh_from_db()
    assert key.monthly_budget is None and key.budget_tokens() == 7000

    listing = client.get("/admin/api/apikey/").content.decode()
    assert key.prefix in listing
    assert client.get("/admin/api/apikey/add/").status_code == 403


def test_it_revokes_selected_keys(client, make_user, make_key):
    from api.models import ApiKey

    first, first_secret = make_key()
    second, _ = make_key()
    kept, kept_secret = make_key()
    client.force_login(make_user(is_staff=True, is_superuser=True))
    response = client.post(
        "/admin/api/apikey/",
        {"action": "revoke", "_selected_action": [first.pk, second.pk]},
    )
    assert response.status_code == 302
    assert ApiKey.objects.authenticate(first_secret) is None
    assert ApiKey.objects.get(pk=second.pk).is_revoked
    assert ApiKey.objects.authenticate(kept_secret) == kept
