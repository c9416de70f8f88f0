"""The plain view (token views without their colours) is the user's, kept on the server:
every page renders it, another user is not affected, and `next` only leads back here."""

import pytest

from core.models import Preferences

pytestmark = pytest.mark.django_db


def test_it_remembers_the_plain_view_for_the_user_only(client, make_user):
    user, other = make_user(), make_user()
    client.force_login(user)
    assert "plain-view" not in client.get("/loom/").text
    response = client.post("/preferences/plain-view/", {"plain": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204
    assert Preferences.objects.plain_view(user) and not Preferences.objects.plain_view(other)
    assert 'class=" plain-view"' in client.get("/loom/").text
    # Without htmx: back to where it was asked, never to another site.
    back = client.post("/preferences/plain-view/", {"plain": "", "next": "/inspect/"})
    assert back.status_code == 302 and back["Location"] == "/inspect/"
    assert not Preferences.objects.plain_view(user)
    away = client.post("/preferences/plain-view/", {"plain": "1", "next": "https://evil.example/"})
    assert away["Location"] == "/"
    client.force_login(other)
    assert "plain-view" not in client.get("/loom/").text
    assert client.get("/preferences/plain-view/").status_code == 405
