"""A wrong password is refused on the login page with a message, and logs nobody in.
In-process (the browser suite keeps the login it needs for its own pages)."""

import pytest

pytestmark = pytest.mark.django_db


def test_it_rejects_a_wrong_password(client, make_user):
    make_user("bob")
    response = client.post("/login/", {"username": "bob", "password": "wrong-password"})
    assert response.status_code == 200
    assert 'role="alert"' in response.text and "didn't match" in response.text
    assert "_auth_user_id" not in client.session
    assert client.get("/workbench/").status_code == 302  # still sent to the login page


def test_it_logs_in_with_the_right_one(client, make_user):
    make_user("ada")
    response = client.post("/login/", {"username": "ada", "password": "a-long-test-password"})
    assert response.status_code == 302
    assert client.get("/workbench/").status_code == 200
