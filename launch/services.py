"""The services of a Weft deployment, described once.

A deployment is these processes, whatever runs them: the web server (one or more,
behind a reverse proxy), one Celery worker per pool of config/lanes.py, one beat,
and — when a model is served on the CPU — the local engine. Each is described here by
its name, command, environment, readiness check and restart policy, and nowhere else:

- `make run` (launch.commands) starts `app_services(...)` on one machine, after the
  embedded Postgres and Redis;
- the topology test (tests/deploy/) starts the same services as a production
  deployment would, two web processes behind nginx;
- deploy/systemd's units are checked against `systemd_services()`
  (tests/deploy/test_it_keeps_the_systemd_units_in_step_with_the_services.py): the same
  commands, with the environment file's variables where `make run` has values.

Django-free (the launcher builds these before Django is set up).
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass, field

from config import lanes

# Where deploy/ puts things on a production machine (docs/deploy.md).
PRODUCTION_PYTHON = "/opt/weft/.venv/bin/python"
PRODUCTION_DATA_DIR = "/var/lib/weft"

# The setting that sizes each worker pool (README: Configuration).
POOL_THREADS_SETTING = {
    lanes.INTERACTIVE_POOL: "WEFT_WORKER_CONCURRENCY",
    lanes.BULK_POOL: "WEFT_BULK_WORKER_CONCURRENCY",
}


@dataclass(frozen=True)
class Ready:
    """How to tell that a started service is up: `path` answers 2xx over HTTP on the
    service's port, or its output holds `line`."""

    path: str = ""
    line: str = ""
    timeout: float = 60.0


@dataclass(frozen=True)
class Restart:
    """A service that exits is started again — unless it exited `burst` times within
    `interval` seconds: it is then left down (and `make run` stops). systemd's
    Restart=always with StartLimitBurst / StartLimitIntervalSec."""

    burst: int = 5
    interval: float = 60.0


@dataclass(frozen=True)
class Service:
    name: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)  # on top of the deployment's
    ready: Ready | None = None
    restart: Restart | None = Restart()
    stop_signal: int = signal.SIGTERM
    port: int | str | None = None  # where `ready.path` is asked


def web(python: str, host: str, port: int | str, name: str = "web") -> Service:
    """The ASGI server (HTTP and WebSocket). Behind a proxy it takes the client's
    address and scheme from X-Forwarded-For / -Proto sent by the addresses in
    FORWARDED_ALLOW_IPS (uvicorn's own variable; default 127.0.0.1)."""
    command = (python, "-m", "uvicorn", "config.asgi:application", "--host", str(host),
               "--port", str(port), "--lifespan", "off", "--no-access-log", "--ws", "websockets")  # fmt: skip
    return Service(
        name,
        command,
        ready=Ready(path="/health/ready"),
        port=port,
    )


def worker_command(
    python: str, concurrency: int | str, queues: str = "", name: str = ""
) -> tuple[str, ...]:
    """A Celery worker. Threads: each task mostly waits on the backend's stream."""
    args: tuple[str, ...] = (python, "-m", "celery", "-A", "config", "worker", "-l", "INFO", "--pool", "threads",
            "-c", str(concurrency), "--without-gossip", "--without-mingle")  # fmt: skip
    if queues:
        args += ("-Q", queues)
    if name:
        args += ("-n", name)
    return args


def workers(
    python: str, prefix: str, interactive_threads: int | str, bulk_threads: int | str
) -> list[Service]:
    """One worker process per pool, each on its own queue (config/lanes.py)."""
    out = []
    for pool in lanes.worker_pools(prefix, interactive_threads, bulk_threads):  # type: ignore[arg-type]
        out.append(
            Service(
                f"worker-{pool.name}",
                worker_command(python, pool.concurrency, ",".join(pool.queues), f"{pool.name}@%h"),
                env={"WEFT_WORKER_POOL": pool.name},  # its label in the metrics,
                ready=Ready(line=" ready."),
            )
        )
    return out


def beat(python: str, schedule: str) -> Service:
    """Celery beat: the sweeps (stale runs, lost messages, expiry). Exactly one."""
    command = (python, "-m", "celery", "-A", "config", "beat", "-l", "WARNING", "--pidfile=",
               "-s", schedule)  # fmt: skip
    return Service("beat", command)


def engine(python: str, port: int | str, threads: int | str, model: str = "") -> Service:
    """The local engine (llama.cpp on the CPU); `model` empty: the bundled SmolLM2."""
    command = (python, "-m", "engine", "--host", "127.0.0.1", "--port", str(port),
               "--n-threads", str(threads), f"--model={model}")  # fmt: skip
    return Service("engine", command, ready=Ready(path="/health", timeout=90.0), port=port)


def app_services(
    python: str,
    *,
    host: str,
    web_ports: Sequence[int | str],
    prefix: str,
    interactive_threads: int | str,
    bulk_threads: int | str,
    schedule: str,
) -> list[Service]:
    """Weft's own processes: web (one per port), the workers, beat."""
    webs = [
        web(python, host, port, name="web" if len(web_ports) == 1 else f"web-{i}")
        for i, port in enumerate(web_ports, start=1)
    ]
    return [
        *webs,
        *workers(python, prefix, interactive_threads, bulk_threads),
        beat(python, schedule),
    ]


def systemd_services() -> dict[str, Service]:
    """The services as deploy/systemd's units run them, by unit name: the production
    paths, and the environment file's variables (systemd expands `${NAME}`) where
    `make run` has values; a web unit is a template whose instance is its port."""
    services = app_services(
        PRODUCTION_PYTHON,
        host="${WEFT_HOST}",
        web_ports=["%i"],
        prefix="${WEFT_GENERATION_QUEUE}",
        interactive_threads=f"${{{POOL_THREADS_SETTING[lanes.INTERACTIVE_POOL]}}}",
        bulk_threads=f"${{{POOL_THREADS_SETTING[lanes.BULK_POOL]}}}",
        schedule=f"{PRODUCTION_DATA_DIR}/celerybeat-schedule",
    )
    services.append(
        engine(
            PRODUCTION_PYTHON,
            "${WEFT_ENGINE_PORT}",
            "${WEFT_ENGINE_THREADS}",
            "${WEFT_ENGINE_MODEL}",
        )
    )
    units = {}
    for service in services:
        unit = "weft-web@.service" if service.name == "web" else f"weft-{service.name}.service"
        units[unit] = service
    return units
