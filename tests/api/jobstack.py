"""Real processes for the job fault tests, on the test database: a Redis of their own
(so it can be restarted), the ASGI server, a Celery worker and Celery beat (sweeping
every second), all in front of the scripted engine."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

from config import lanes
from launch.datadir import scratch_dir
from launch.embedded import start_redis
from launch.services import worker_command
from tests.api.conftest import JOBS_ENV, proxy_env_for
from tests.support import Supervisor, free_port, start_web, wait_until


class JobStack:
    def __init__(self, engine: str) -> None:
        self.scratch = scratch_dir("weft-jobs-")
        self.services = Supervisor()
        self.app = Supervisor()
        self.sock = self.scratch / "redis.sock"
        self.env = proxy_env_for(
            engine,
            **{
                **JOBS_ENV,
                "WEFT_GENERATION_QUEUE": "api-jobs-faults",
                "REDIS_URL": f"unix://{self.sock}",
                "WEFT_DATA_DIR": str(self.scratch),
                "WEFT_JOB_SWEEP_SECONDS": "1",
                "WEFT_JOB_REQUEUE_SECONDS": "3",
            },
        )
        self.web = None
        self.worker = None
        self.url = ""

    def __enter__(self) -> JobStack:
        try:
            start_redis(self.services, self.sock, persist=False)
            self.start_web()
            self.start_worker()
            log = open(self.scratch / "beat.log", "wb")  # noqa: SIM115 - closed with the process
            self.app.start(
                "beat",
                [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO",
                 "--pidfile=", "-s", str(self.scratch / "celerybeat-schedule")],
                env_vars=self.env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.app.stop_all()
        self.services.stop_all()
        shutil.rmtree(self.scratch, ignore_errors=True)

    @property
    def api(self) -> str:
        return f"{self.url}/v1"

    def start_web(self) -> None:
        self.url = start_web(self.app, self.env, free_port())
        self.web = self.app.children[-1][1]

    def start_worker(self) -> None:
        """A worker for every pool's queue, where runs and beat's sweeps go (its own
        Redis: no other stack's worker reads them)."""
        log = self.scratch / f"worker-{time.monotonic_ns()}.log"
        handle = open(log, "wb")  # noqa: SIM115 - closed with the process
        prefix = self.env["WEFT_GENERATION_QUEUE"]
        queues = ",".join(lanes.queue_name(pool, prefix) for pool in lanes.POOLS)
        self.worker = self.app.start(
            "worker", worker_command(sys.executable, 2, queues, name=f"jobs-{free_port()}@%h"),
            env_vars=self.env, stdout=handle, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_until(
            lambda: self.worker.poll() is None and b" ready." in log.read_bytes(), 60, "worker"
        )

    def kill(self, proc) -> None:
        """SIGKILL: nothing runs in the process any more."""
        proc.kill()
        proc.wait()
        self.app.children = [c for c in self.app.children if c[1] is not proc]

    def restart_redis(self) -> None:
        for entry in list(self.services.children):
            name, proc, sig = entry
            if name == "redis":
                proc.send_signal(sig)
                proc.wait(timeout=15)
                self.services.children.remove(entry)
        start_redis(self.services, self.sock, persist=False)

    def wait(self, predicate, timeout: float, what: str):
        return wait_until(predicate, timeout, what, interval=0.1)
