"""Only a SHA-256 of a key's secret is stored: the secret is in no table and no log
line, and a lookup compares hashes (wrong, tampered or revoked secrets are refused)."""

import hashlib
import logging

import pytest
from django.db import connection

from api.models import ApiKey

pytestmark = pytest.mark.django_db


def everything_in_the_database() -> str:
    dump = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - names from introspection
            dump.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(dump)


def test_it_keeps_the_secret_out_of_the_database_and_the_logs(client, make_user, caplog):
    caplog.set_level(logging.DEBUG)
    user = make_user()
    client.force_login(user)
    html = client.post("/keys/", {"name": "ci"}).content.decode()
    key = ApiKey.objects.get(user=user)
    secret = html.split('<pre id="key-secret" class="code">')[1].split("</pre>")[0]
    assert ApiKey.objects.authenticate(secret) == key
    client.get("/keys/")
    client.post(f"/keys/{key.pk}/revoke/", {"confirm": "1"})

    assert key.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    stored = everything_in_the_database()
    assert key.secret_hash in stored  # the scan does see the key's row
    rest = secret.split(".", 1)[1]
    assert secret not in stored and rest not in stored
    assert rest not in caplog.text and key.secret_hash not in caplog.text
    assert rest not in repr(key) and rest not in str(key)


def test_it_refuses_wrong_tampered_and_revoked_secrets(make_key):
    key, secret = make_key()
    prefix, rest = secret.split(".", 1)
    assert ApiKey.objects.authenticate(secret) == key
    tampered = f"{prefix}.{rest[:-1]}{'A' if rest[-1] != 'A' else 'B'}"
    for wrong in [tampered, f"{prefix}.", prefix, "", "Bearer " + secret, rest, secret + "x"]:
        assert ApiKey.objects.authenticate(wrong) is None, wrong
    key.revoke()
    assert ApiKey.objects.authenticate(secret) is None


def test_it_refuses_the_key_of_an_inactive_user(make_key):
    key, secret = make_key()
    key.user.is_active = False
    key.user.save()
    assert ApiKey.objects.authenticate(secret) is None


def test_it_authenticates_from_async_code(make_key):
    from asgiref.sync import async_to_sync

    @async_to_sync
    async def find(secret: str) -> ApiKey | None:
        return await ApiKey.objects.aauthenticate(secret)

    key, secret = make_key()
    found = find(secret)
    assert found == key and found.user == key.user  # the user comes along, no extra query
    assert find(secret[:-1]) is None
