"""Revoking a key on the page (htmx swaps its row) makes its secret useless at once;
the row stays, marked revoked, with no revoke button."""

import pytest

from api.models import ApiKey

pytestmark = pytest.mark.django_db


def test_it_revokes_with_htmx_and_swaps_the_row(client, make_key):
    key, secret = make_key(name="old laptop")
    client.force_login(key.user)
    response = client.post(
        f"/keys/{key.pk}/revoke/", {"confirm": "1"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    row = response.content.decode()
    assert row.strip().startswith(f'<tr id="key-{key.pk}" class="revoked">')
    assert "revoked" in row and "Revoke</button>" not in row and "<html" not in row
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert ApiKey.objects.authenticate(secret) is None


def test_it_revokes_without_javascript_and_returns_to_the_list(client, make_key):
    key, _ = make_key()
    client.force_login(key.user)
    # First it asks (the page's button asks in a dialog and sends confirm=1).
    asked = client.post(f"/keys/{key.pk}/revoke/")
    assert asked.status_code == 200 and "Revoke it</button>" in asked.content.decode()
    assert not ApiKey.objects.get(pk=key.pk).is_revoked
    response = client.post(f"/keys/{key.pk}/revoke/", {"confirm": "1"})
    assert response.status_code == 302 and response["Location"] == "/keys/"
    assert ApiKey.objects.get(pk=key.pk).is_revoked


def test_it_only_revokes_by_post(client, make_key):
    key, _ = make_key()
    client.force_login(key.user)
    assert client.get(f"/keys/{key.pk}/revoke/").status_code == 405
    assert not ApiKey.objects.get(pk=key.pk).is_revoked
