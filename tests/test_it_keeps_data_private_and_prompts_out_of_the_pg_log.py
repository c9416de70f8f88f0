"""The data dir is 0700 and its files 0600 (the secret key from its creation), and a
failing statement that carries a prompt leaves the prompt out of Postgres's log."""

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import DataError, transaction

from completions.models import Generation
from tests.support import BASE_DIR

MARKER = "weft-marker-prompt-7f3a9c"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.django_db
def test_it_keeps_a_failed_statements_prompt_out_of_the_log(make_user):
    host = Path(settings.DATABASES["default"]["HOST"] or "/nonexistent")
    log = host.parent / f"{host.name}.log"
    if not log.exists():
        pytest.skip("the tests' database was not started by the launcher")
    assert mode(host) == 0o700 and mode(log) == 0o600
    user = make_user()
    with pytest.raises(DataError), transaction.atomic():
        Generation.objects.create(
            owner=user, kind="workbench", params={"prompt": MARKER}, request_id="x" * 300
        )
    deadline = time.monotonic() + 5
    while b"value too long" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.1)
    text = log.read_bytes()
    assert b"value too long" in text  # the error itself is logged...
    assert MARKER.encode() not in text  # ...without the statement that held the prompt


def test_it_creates_the_data_dir_and_secret_key_private(tmp_path):
    data = tmp_path / "fresh" / "data"
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env["WEFT_DATA_DIR"] = str(data)
    # umask 0: whatever the creating call does not restrict is open to everyone.
    code = "import os; os.umask(0); import config.settings"
    subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env=env, check=True)
    assert mode(data) == 0o700
    assert mode(data / "secret_key") == 0o600
