"""manage.py weft_api_key: create prints the secret alone on its last line, list
shows prefixes (never secrets), revoke by prefix."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from api.models import ApiKey

pytestmark = pytest.mark.django_db


def run(*args: str) -> list[str]:
    out = StringIO()
    call_command("weft_api_key", *args, stdout=out)
    return out.getvalue().splitlines()


def test_it_creates_lists_and_revokes(make_user, settings):
    settings.WEFT_API_KEY_MONTHLY_BUDGET = 9000
    alice = make_user("alice")
    make_user("bob")
    lines = run("create", "alice", "--name", "nightly evals", "--budget", "500")
    secret = lines[-1]
    key = ApiKey.objects.authenticate(secret)
    assert key is not None and key.user == alice and key.name == "nightly evals"
    assert key.monthly_budget == 500 and key.budget_tokens() == 500
    assert secret not in "\n".join(lines[:-1])  # alone on its line, nowhere else
    default = ApiKey.objects.authenticate(run("create", "bob")[-1])
    assert default.name == "cli" and default.budget_tokens() == 9000

    listing = run("list")
    assert len(listing) == 2
    assert listing[0].split("\t")[:4] == [key.prefix, "alice", "nightly evals", "active"]
    assert "budget 500" in listing[0] and "budget 9000" in listing[1]
    assert secret.split(".")[1] not in "\n".join(listing)
    assert run("list", "bob")[0].startswith(default.prefix)

    assert run("revoke", key.prefix) == [f"revoked {key.prefix} (nightly evals, alice)"]
    assert ApiKey.objects.authenticate(secret) is None
    assert "revoked" in run("list", "alice")[0]


def test_it_says_what_is_wrong(make_user):
    with pytest.raises(CommandError, match="no user 'nobody'"):
        run("create", "nobody")
    with pytest.raises(CommandError, match="no key with prefix"):
        run("revoke", "weft-00000000")
    make_user("carol")
    with pytest.raises(CommandError, match="--budget must be >= 0"):
        run("create", "carol", "--budget", "-1")
    assert not ApiKey.objects.exists()
