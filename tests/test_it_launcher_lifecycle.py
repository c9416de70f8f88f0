"""`make run` end to end: embedded Postgres, Redis and engine, a second start
refused, kill -9 leaves nothing behind, Ctrl-C stops everything."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support import BASE_DIR, free_port, wait_until


class Launcher:
    def __init__(self, env, python=sys.executable, cwd=BASE_DIR):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [python, "-m", "launch", "run"],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def find(self, pattern):
        for line in self.lines:
            match = re.search(pattern, line)
            if match:
                return match
        return None


def port_closed(port):
    try:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=0.5)
    except httpx.TransportError:
        return True
    return False


@pytest.fixture
def launch_env():
    # Not pytest's tmp_path: that lives under a 0700 folder other pytest runs prune,
    # and Postgres (run as another user when we are root) must traverse it.
    data = tempfile.mkdtemp(prefix="weft-run-")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.pop("WEFT_BACKEND_URL", None)
    env.update(
        WEFT_DATA_DIR=str(data),
        WEFT_PORT=str(free_port()),
        WEFT_ENGINE_PORT=str(free_port()),
        WEFT_WORKER_CONCURRENCY="2",
    )
    yield env
    shutil.rmtree(data, ignore_errors=True)


@pytest.mark.slow
def test_it_runs_restarts_after_kill_and_stops_on_ctrl_c(launch_env):
    port, engine_port = launch_env["WEFT_PORT"], launch_env["WEFT_ENGINE_PORT"]
    first = Launcher(launch_env)
    try:
        started = time.monotonic()
        wait_until(
            lambda: first.find("ready at") or first.proc.poll() is not None, 120, "make run (cold)"
        )
        assert first.find("ready at"), first.lines
        cold = time.monotonic() - started
        # stdout is a pipe here, as in a service's log: the password is in a file.
        shown = first.find(r"^username: (\S+)  password: in (\S+)$")
        assert shown, first.lines
        creds = (None, shown[1], Path(shown[2]).read_text().strip())

        health = httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=10)
        assert health.status_code == 200, health.text
        assert health.json()["checks"]["backend"]["ok"] is True

        # The printed credentials log in through the real login form.
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            form = http.get("/login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
            done = http.post(
                "/login/",
                data={"username": creds[1], "password": creds[2], "csrfmiddlewaretoken": token},
            )
            assert done.status_code == 302 and "/login/" not in done.headers["location"]

        second = subprocess.run(
            [sys.executable, "-m", "launch", "run"],
            cwd=BASE_DIR, env=launch_env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert second.returncode == 2
        assert "already running" in second.stdout
        assert "Traceback" not in second.stderr

        first.proc.kill()  # kill -9: the children must follow
        first.proc.wait()
        wait_until(lambda: port_closed(port) and port_closed(engine_port), 15, "children to exit")
    finally:
        if first.proc.poll() is None:
            first.proc.kill()

    again = Launcher(launch_env)
    try:
        started = time.monotonic()
        wait_until(
            lambda: again.find("ready at") or again.proc.poll() is not None, 120, "make run (warm)"
        )
        assert again.find("ready at"), again.lines
        warm = time.monotonic() - started
        shown = again.find(rf"^username: {re.escape(creds[1])}  password: in (\S+)$")
        assert shown and Path(shown[1]).read_text().strip() == creds[2], again.lines
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200

        again.proc.send_signal(signal.SIGINT)
        stopping = time.monotonic()
        again.proc.wait(timeout=15)
        assert time.monotonic() - stopping < 10
        wait_until(lambda: port_closed(port) and port_closed(engine_port), 5, "ports to close")
    finally:
        if again.proc.poll() is None:
            again.proc.kill()
    print(f"\nmake run to healthy: cold {cold:.1f} s, warm {warm:.1f} s")
