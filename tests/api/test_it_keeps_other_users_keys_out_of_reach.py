"""Someone else's keys are invisible on the page and cannot be revoked (404, the
key stays live); the page needs a login."""

import pytest

from api.models import ApiKey

pytestmark = pytest.mark.django_db


def test_it_hides_and_protects_other_users_keys(client, make_user, make_key):
    theirs, secret = make_key(name="their-secret-project")
    mine, _ = make_key(make_user(), name="mine")
    client.force_login(mine.user)
    html = client.get("/keys/").content.decode()
    assert "mine" in html and mine.prefix in html
    assert "their-secret-project" not in html and theirs.prefix not in html
    assert client.post(f"/keys/{theirs.pk}/revoke/").status_code == 404
    assert (
        client.post(f"/keys/{theirs.pk}/revoke/", headers={"HX-Request": "true"}).status_code == 404
    )
    assert ApiKey.objects.authenticate(secret) == theirs  # still live


def test_it_needs_a_login(client, make_key):
    key, _ = make_key()
    for response in (client.get("/keys/"), client.post("/keys/", {"name": "x"}),
                     client.post(f"/keys/{key.pk}/revoke/")):  # fmt: skip
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert ApiKey.objects.count() == 1 and not ApiKey.objects.get().is_revoked
