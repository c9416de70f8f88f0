"""Helpers for tests that run Weft's real processes against the test database."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from config import lanes
from launch import services
from launch.runtime import BASE_DIR
from launch.services import worker_command
from launch.supervisor import Supervisor

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(test_db_name: str, **extra: str) -> dict[str, str]:
    """The environment for a Weft process that must see the test database."""
    env = dict(os.environ)
    parts = urlsplit(env["DATABASE_URL"])
    env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{test_db_name}"))
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    # Sessions made in the test process must be valid in its children, which (as the
    # service user, when the tests run as root) may not read this process's key file.
    from django.conf import settings

    env["SECRET_KEY"] = settings.SECRET_KEY
    env.update(extra)
    return env


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
            if result:
                return result
        except Exception as exc:  # not ready yet
            last_error = exc
        time.sleep(interval)
    raise AssertionError(f"{what} not ready within {timeout} s (last error: {last_error})")


def start_web(sup: Supervisor, env: dict, port: int, log=None):
    """The ASGI server as `make run` starts it (launch.services); `log`: a file its
    output goes to."""
    import httpx

    proc = sup.start(
        "web",
        list(services.web(sys.executable, "127.0.0.1", port).command),
        env_vars=env,
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
    )
    wait_until(
        lambda: (
            proc.poll() is None
            and httpx.get(f"http://127.0.0.1:{port}/login/", timeout=2).status_code == 200
        ),
        30,
        "ASGI server",
    )
    return f"http://127.0.0.1:{port}"


def start_worker(
    sup: Supervisor,
    env: dict,
    log: Path,
    concurrency: int = 4,
    restart=False,
    pools: tuple[str, ...] = lanes.POOLS,
):
    """A real Celery worker consuming the queues its environment sends runs to (the
    pools' queues under WEFT_GENERATION_QUEUE, config/lanes.py; every pool in one
    process unless `pools` says which). Each test stack talks to its own engine, so it
    sets its own prefix in the environment of both its web server and its worker: its
    runs then never reach another stack's worker."""
    prefix = env.get("WEFT_GENERATION_QUEUE") or ""
    queues = ",".join(lanes.queue_name(pool, prefix) for pool in pools)
    label = f"{prefix or lanes.DEFAULT_PREFIX}-{'-'.join(pools)}"
    handle = open(log, "wb")  # noqa: SIM115 - closed with the process
    proc = sup.start(
        f"worker-{label}",
        list(worker_command(sys.executable, concurrency, queues, name=f"{label}-{free_port()}@%h")),
        env_vars=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        restart=restart,
    )  # fmt: skip
    wait_until(lambda: proc.poll() is None and b" ready." in log.read_bytes(), 60, "Celery worker")
    return proc


__all__ = ["BASE_DIR", "Supervisor"]
