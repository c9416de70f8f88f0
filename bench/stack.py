"""What the benches that need the whole app share: percentiles, and Postgres, Redis
and the ASGI server started by the launcher's own functions in a scratch folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx

from launch import services
from launch.commands import manage
from launch.embedded import ensure_database, start_postgres, start_redis
from launch.supervisor import Supervisor, wait_for


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def start_services(scratch: Path, sup: Supervisor, **settings: str) -> dict[str, str]:
    """Postgres and Redis in `scratch` (make it with launch.datadir.scratch_dir: as root the
    services' user must reach it), migrated; the environment for Weft's processes,
    with `settings` on top."""
    start_postgres(sup, scratch / "pg", durable=False)
    ensure_database(scratch / "pg", "weft")
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"postgresql://postgres@/weft?host={scratch / 'pg'}",
        REDIS_URL=start_redis(sup, scratch / "redis.sock", persist=False),
        WEFT_DATA_DIR=str(scratch / "data"),
        # One key for every process: session auth hashes must agree across them.
        SECRET_KEY="bench-" + os.urandom(16).hex(),
        WEFT_LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="config.settings",
        **settings,
    )
    manage(env, "migrate", "--noinput", capture=True)
    return env


def start_web(sup: Supervisor, env: dict[str, str], port: int) -> str:
    proc = sup.start(
        "web",
        [*services.web(sys.executable, "127.0.0.1", port).command, "--log-level", "warning"],
        env_vars=env,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for("web", lambda: httpx.get(f"{url}/login/", timeout=2).status_code == 200, proc, 60)
    return url
