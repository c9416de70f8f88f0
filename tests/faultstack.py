"""A stack of real processes a test owns whole — Postgres, Redis, the scripted engine,
the ASGI server and a Celery worker — whose services it can stop and start again
(tests/completions/test_it_loses_no_generated_text_under_faults.py,
tests/api/test_it_answers_after_a_postgres_restart.py)."""

import os
import re
import secrets
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg

from engine.testing import run_engine
from launch.commands import manage
from launch.datadir import scratch_dir
from launch.embedded import ensure_database, start_postgres, start_redis
from launch.runtime import runtime
from tests.support import Supervisor, free_port, start_web, start_worker


class Stack:
    """Services the test can stop and start again, and the app processes on them."""

    def __init__(self) -> None:
        self.scratch = scratch_dir("weft-faults-")
        self.rt = runtime()
        self.services = Supervisor(self.rt)
        self.app = Supervisor(self.rt)
        self.pg = self.scratch / "pg"
        self.sock = self.scratch / "redis.sock"
        self.worker = None

    def start_postgres(self) -> None:
        start_postgres(self.services, self.pg, durable=False)

    def start_redis(self) -> None:
        start_redis(self.services, self.sock, persist=False)

    def restart(self, name: str) -> None:
        for entry in list(self.services.children):
            child, proc, sig = entry
            if child == name:
                proc.send_signal(sig)
                proc.wait(timeout=15)
                self.services.children.remove(entry)
        {"postgres": self.start_postgres, "redis": self.start_redis}[name]()

    def start_worker(self) -> None:
        log = self.scratch / f"worker-{time.monotonic_ns()}.log"
        # Restartable, as `make run` starts it: kombu 5.7's worker exits when Redis goes
        # away at the wrong moment, and the supervisor starts it again.
        self.worker = start_worker(self.app, self.env, log, concurrency=4, restart=True)

    def db(self) -> psycopg.Connection:
        return psycopg.connect(f"host={self.pg} user=postgres dbname=weft", autocommit=True)

    def supervise(self) -> None:
        """What the launcher's loop does: start again a worker a fault took down."""
        self.supervising = threading.Event()

        def loop() -> None:
            while not self.supervising.wait(0.2):
                self.app.revive()

        self.supervisor = threading.Thread(target=loop, daemon=True)
        self.supervisor.start()

    def stop(self) -> None:
        if getattr(self, "supervisor", None):
            self.supervising.set()
            self.supervisor.join(5)
        self.app.stop_all()
        self.services.stop_all()
        shutil.rmtree(self.scratch, ignore_errors=True)


@contextmanager
def running_stack(**env: str):
    """A Stack, everything started, the local account logged in-able; `env` adds or
    overrides the processes' environment."""
    stack = Stack()
    try:
        with run_engine("scripted") as engine:
            stack.engine = engine
            stack.start_postgres()
            ensure_database(stack.pg, "weft")
            stack.start_redis()
            stack.env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "DATABASE_URL": f"postgresql://postgres@/weft?host={stack.pg}",
                "REDIS_URL": f"unix://{stack.sock}",
                "WEFT_BACKEND_URL": f"{engine}/v1",
                "WEFT_DATA_DIR": str(stack.scratch),
                "SECRET_KEY": secrets.token_urlsafe(50),
                **env,
            }
            manage(stack.env, "migrate", "--noinput", capture=True)
            account = manage(stack.env, "weft_local_account", capture=True)
            stack.username, stack.password = re.search(
                r"username: (\S+)  password: (\S+)", account
            ).groups()
            stack.url = start_web(stack.app, stack.env, free_port())
            stack.start_worker()
            if stack.rt.user is not None:  # run as root: the app runs as the service user
                assert Path(f"/proc/{stack.worker.pid}").stat().st_uid == stack.rt.user.pw_uid
            stack.supervise()
            yield stack
    finally:
        stack.stop()


def log_in(stack: Stack) -> httpx.Client:
    http = httpx.Client(base_url=stack.url, timeout=10)
    form = http.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    done = http.post(
        "/login/",
        data={"username": stack.username, "password": stack.password, "csrfmiddlewaretoken": token},
    )
    assert done.status_code == 302
    return http
