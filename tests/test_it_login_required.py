import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/workbench/", "/loom/", "/inspect/", "/history/", "/usage/"])
def test_it_sends_anonymous_visitors_to_login(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


def test_it_shows_admin_link_to_staff_only(client, make_user):
    client.force_login(make_user())
    assert b'href="/admin/"' not in client.get("/workbench/").content
    client.force_login(make_user(is_staff=True))
    assert b'href="/admin/"' in client.get("/workbench/").content
