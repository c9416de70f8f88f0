"""A user has at most WEFT_API_MAX_KEYS_PER_USER live keys: the API keys page and
`manage.py weft_api_key create` refuse the next one with a clear message and make
nothing; revoking one makes room again; another user is not affected."""

import pytest
from django.core.management import CommandError, call_command

from api.models import ApiKey

pytestmark = pytest.mark.django_db


def test_it_refuses_the_21st_key_on_the_page(client, make_user, settings):
    assert settings.WEFT_API_MAX_KEYS_PER_USER == 20  # the default
    user = make_user()
    client.force_login(user)
    for i in range(20):
        assert client.post("/keys/", {"name": f"k{i}"}).status_code == 200
    refused = client.post("/keys/", {"name": "one too many"})
    assert refused.status_code == 400
    assert "You already have 20 live API keys" in refused.content.decode()
    assert ApiKey.objects.filter(user=user).count() == 20
    ApiKey.objects.filter(user=user).first().revoke()
    assert client.post("/keys/", {"name": "room again"}).status_code == 200
    assert ApiKey.objects.filter(user=user, revoked_at__isnull=True).count() == 20
    other = make_user()
    client.force_login(other)
    assert client.post("/keys/", {"name": "theirs"}).status_code == 200


def test_it_refuses_the_next_key_from_the_command_line(make_user, settings):
    settings.WEFT_API_MAX_KEYS_PER_USER = 2
    user = make_user(username="capped")
    call_command("weft_api_key", "create", "capped")
    call_command("weft_api_key", "create", "capped")
    with pytest.raises(CommandError, match="already have 2 live API keys"):
        call_command("weft_api_key", "create", "capped")
    assert ApiKey.objects.filter(user=user).count() == 2
