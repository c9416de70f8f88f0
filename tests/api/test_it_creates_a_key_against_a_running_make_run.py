"""`manage.py weft_api_key` works beside a running `make run`: with nothing but the
same WEFT_DATA_DIR it reaches the launcher's embedded Postgres, and the key it prints
works against the running server's /v1 at once (and stops working when revoked)."""

import os
import shutil
import subprocess
import sys
import tempfile

import httpx
import pytest

from engine.testing import run_engine
from tests.support import BASE_DIR, free_port, wait_until
from tests.test_it_launcher_lifecycle import Launcher

pytestmark = pytest.mark.slow


def manage(env: dict, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "manage.py", "weft_api_key", *args],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_it_makes_a_working_key_for_the_running_server():
    data = tempfile.mkdtemp(prefix="weft-run-")  # traversable by the postgres user (see lifecycle)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    port = free_port()
    env.update(
        WEFT_DATA_DIR=data,
        WEFT_PORT=str(port),
        WEFT_WORKER_CONCURRENCY="1",
        WEFT_API_KEY_CACHE_SECONDS="1",
    )
    with run_engine("scripted") as engine:
        env["WEFT_BACKEND_URL"] = f"{engine}/v1"
        launcher = Launcher(env)
        try:
            wait_until(
                lambda: launcher.find("ready at") or launcher.proc.poll() is not None,
                120,
                "make run",
            )
            assert launcher.find("ready at"), launcher.lines
            username = launcher.find(r"^username: (\S+)  password:")[1]

            # A second shell: the same folder and data dir, nothing else configured.
            shell = {k: v for k, v in env.items() if k != "WEFT_BACKEND_URL"}
            lines = manage(
                shell, "create", username, "--name", "from the shell", "--budget", "1000"
            )
            secret = lines[-1]
            assert secret.startswith("weft-") and " " not in secret
            prefix = secret.split(".")[0]
            assert manage(shell, "list")[0].startswith(
                f"{prefix}\t{username}\tfrom the shell\tactive"
            )

            api = f"http://127.0.0.1:{port}/v1"
            auth = {"Authorization": f"Bearer {secret}"}
            models = httpx.get(f"{api}/models", headers=auth, timeout=10)
            assert models.status_code == 200, models.text
            assert [m["id"] for m in models.json()["data"]] == ["scripted"]

            manage(shell, "revoke", prefix)

            # The server keeps a key for WEFT_API_KEY_CACHE_SECONDS (1 s here) per process.
            def refused():
                response = httpx.get(f"{api}/models", headers=auth, timeout=10)
                return response if response.status_code == 401 else None

            answer = wait_until(refused, 10, "the revoked key to be refused")
            assert answer.json()["error"]["code"] == "invalid_api_key"
        finally:
            launcher.proc.terminate()
            launcher.proc.wait(timeout=30)
            shutil.rmtree(data, ignore_errors=True)
