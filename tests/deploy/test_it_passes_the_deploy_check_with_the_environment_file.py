"""`manage.py check --deploy` is clean with deploy/weft.env once its placeholders are
replaced — and names each placeholder left in."""

import os
import secrets
import subprocess
import sys

from tests.deploy.files import environment
from tests.support import BASE_DIR


def check_deploy(tmp_path, **overrides: str) -> subprocess.CompletedProcess:
    # Nothing of this test run's own environment: the file's, as a unit gets it.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **environment()}
    # Where this machine may write (the file's own paths are a production machine's).
    env.update(WEFT_DATA_DIR=str(tmp_path), PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
               STATIC_ROOT=str(tmp_path / "static"), DJANGO_SETTINGS_MODULE="config.settings")  # fmt: skip
    env.update(overrides)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_it_is_clean_once_the_placeholders_are_replaced(tmp_path):
    done = check_deploy(
        tmp_path,
        SECRET_KEY=secrets.token_urlsafe(50),
        DATABASE_URL="postgresql://weft:a-real-password@db.internal:5432/weft",
        REDIS_URL="redis://:a-real-password@redis.internal:6379/0",
        WEFT_BACKENDS='[{"name": "gpu1", "url": "http://gpu1.internal:8000/v1"}]',
        WEFT_METRICS_TOKEN=secrets.token_urlsafe(32),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_it_names_the_placeholders_left(tmp_path):
    done = check_deploy(tmp_path)
    assert done.returncode != 0
    for name in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "WEFT_METRICS_TOKEN"):
        assert f"{name} is still deploy/weft.env's placeholder" in done.stderr, done.stderr
