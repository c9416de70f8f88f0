"""Failed logins are throttled per account and per address (django-axes): the issue's
8 wrong passwords then the right one, all accepted, is now a lockout at the limit —
a styled page saying why and for how long, 429, for the right password too — while
another account from another address logs in; a success before the limit clears the
count; staff unlock from the admin."""

import pytest
from axes.models import AccessAttempt

pytestmark = pytest.mark.django_db
GOOD = "a-long-test-password"


def _login(client, username: str, password: str, address: str = "198.51.100.7"):
    return client.post("/login/", {"username": username, "password": password},
                       REMOTE_ADDR=address)  # fmt: skip


def test_it_locks_an_account_out_at_the_limit(client, make_user, settings):
    settings.AXES_FAILURE_LIMIT = 5
    make_user("bob")
    make_user("eve")
    codes = [_login(client, "bob", f"wrong-{i}", f"203.0.113.{i}").status_code for i in range(5)]
    assert codes == [200, 200, 200, 200, 429]  # five addresses, one account
    locked = _login(client, "bob", GOOD, "203.0.113.99")
    assert locked.status_code == 429 and "_auth_user_id" not in client.session
    page = locked.content.decode()
    assert "Too many failed logins" in page and "Try again in 15 minutes" in page
    assert 'class="card narrow"' in page  # the styled page, not a bare text
    # Another account from another address is unaffected.
    assert _login(client, "eve", GOOD, "192.0.2.1").status_code == 302


def test_it_locks_an_address_out_at_the_limit(client, make_user, settings):
    settings.AXES_FAILURE_LIMIT = 5
    for name in ("u0", "u1", "u2", "u3", "u4", "ok"):
        make_user(name)
    codes = [_login(client, f"u{i}", "wrong", "203.0.113.5").status_code for i in range(5)]
    assert codes[-1] == 429
    assert _login(client, "ok", GOOD, "203.0.113.5").status_code == 429
    assert _login(client, "ok", GOOD, "192.0.2.44").status_code == 302


def test_it_clears_the_count_on_success_and_staff_unlock(client, make_user, settings):
    settings.AXES_FAILURE_LIMIT = 3
    make_user("ada")
    for _ in range(2):
        assert _login(client, "ada", "wrong").status_code == 200
    assert _login(client, "ada", GOOD).status_code == 302
    client.logout()
    for _ in range(2):
        assert _login(client, "ada", "wrong").status_code == 200  # counted from zero again
    assert _login(client, "ada", "wrong").status_code == 429

    staff = make_user(is_staff=True, is_superuser=True)
    client.force_login(staff)
    rows = list(AccessAttempt.objects.values_list("pk", flat=True))
    response = client.post("/admin/axes/accessattempt/",
                           {"action": "unlock", "_selected_action": rows}, follow=True)  # fmt: skip
    assert "Unlocked" in response.content.decode()
    client.logout()
    assert _login(client, "ada", GOOD).status_code == 302
