"""A lost disk is not the end: `manage.py weft_backup` of a populated Weft — a user, a
tree with nodes, a run, an API key, ledger rows — restored by `manage.py weft_restore`
into a fresh database gives back the same trees, runs, keys (the key still
authenticates there) and ledger, and the secret key; a restore refuses a database that
is not empty."""

import json
import secrets

import psycopg
import pytest
from django.conf import settings
from django.db import connection, transaction

from api.models import ApiKey
from completions import budget
from launch import LaunchError
from launch.commands import manage
from launch.datadir import scratch_dir
from tests.support import child_env
from tests.workbench.helpers import make_generation

pytestmark = pytest.mark.django_db(transaction=True)

ROWS = {
    "tree": "SELECT title, (SELECT count(*) FROM loom_node n WHERE n.tree_id = t.id) FROM loom_tree t",
    "nodes": "SELECT text FROM loom_node ORDER BY text",
    "run": "SELECT state, choices::text, usage::text, charged_tokens FROM completions_generation",
    "key": "SELECT prefix, secret_hash, revoked_at FROM api_apikey",
    "ledger": "SELECT account, month, used, reserved FROM completions_budgetmonth ORDER BY account",
    "user": "SELECT username, password FROM auth_user",
}


def _rows(dsn_db: str) -> dict[str, list]:
    params = {**connection.get_connection_params(), "dbname": dsn_db}
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in ROWS.items()}


@pytest.fixture
def fresh_database():
    name = f"weft_restored_{secrets.token_hex(4)}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    yield name
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_it_restores_the_same_weft_into_a_fresh_database(make_user, fresh_database):
    from loom.models import Tree

    user = make_user("ada")
    tree = Tree.objects.create_from_prompt(user, "Once upon a time", title="kept")
    tree.root.add_child(" there was").add_child(" a loom")
    make_generation(user, texts=[" and it wove"])
    key, secret = ApiKey.objects.create_key(user, "scripts")
    with transaction.atomic():
        month = budget.reserve(user, 40, prompt_tokens=4, choice_count=1)
    with transaction.atomic():
        budget.settle(user.pk, month, 40, 4, 10)
    original = _rows(settings.DATABASES["default"]["NAME"])
    assert original["ledger"] and len(original["nodes"]) == 3

    folder = scratch_dir("weft-backup-") / "backup"
    said = manage(child_env(settings.DATABASES["default"]["NAME"]), "weft_backup", str(folder),
                  capture=True)  # fmt: skip
    assert "backed up to" in said
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["rows"]["loom_node"] == 3 and manifest["rows"]["api_apikey"] == 1
    assert (folder / "secret_key").read_text() == settings.SECRET_KEY
    assert (folder / "secret_key").stat().st_mode & 0o077 == 0

    restored_env = child_env(fresh_database)
    said = manage(restored_env, "weft_restore", str(folder), capture=True)
    assert "restored" in said
    assert _rows(fresh_database) == original
    check = (
        "from api.models import ApiKey; "
        f"k = ApiKey.objects.authenticate({secret!r}); print('key', k.prefix if k else None)"
    )
    said = manage(restored_env, "shell", "-c", check, capture=True)
    assert f"key {key.prefix}" in said

    # Restoring over a Weft that is there already is refused, and changes nothing.
    with pytest.raises(LaunchError, match="has tables already"):
        manage(restored_env, "weft_restore", str(folder), capture=True)
    assert _rows(fresh_database) == original
