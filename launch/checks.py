"""What is checked before anything starts: the environment (every variable parsed,
one line naming a bad one), and on a full `make test` the lint and type checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from config import env
from launch import LaunchError
from launch.runtime import BASE_DIR


def check_environment() -> dict:
    """Parse every variable before anything starts; raise ImproperlyConfigured."""
    backends = env.env_backends("WEFT_BACKENDS")
    cfg = {
        "database_url": env.env_str("DATABASE_URL"),
        "redis_url": env.env_str("REDIS_URL"),
        "backend_url": env.env_str("WEFT_BACKEND_URL"),
        # The local engine runs unless WEFT_BACKEND_URL names another server, or
        # WEFT_BACKENDS lists only other servers.
        "engine": not env.env_str("WEFT_BACKEND_URL")
        and (not backends or any(b["url"] == "local" for b in backends)),
        "host": env.env_str("WEFT_HOST", "127.0.0.1"),
        "port": env.env_int("WEFT_PORT", 8000, minimum=1),
        "engine_port": env.env_int("WEFT_ENGINE_PORT", 8001, minimum=1),
        "engine_model": env.env_str("WEFT_ENGINE_MODEL"),
        "worker_concurrency": env.env_int("WEFT_WORKER_CONCURRENCY", 8, minimum=1),
        "bulk_concurrency": env.env_int("WEFT_BULK_WORKER_CONCURRENCY", 8, minimum=1),
        "queue_prefix": env.env_str("WEFT_GENERATION_QUEUE"),
        # All cores for `make run`: measured 72 tok/s with 2 threads vs 48 with 1 on an
        # idle 2-core machine (the engine's own default of 1 suits loaded test runs).
        "engine_threads": env.env_int("WEFT_ENGINE_THREADS", os.cpu_count() or 1, minimum=1),
    }
    # Reading the settings module parses every other variable with the same
    # typed helpers the running processes use, so nothing is checked twice.
    import importlib

    importlib.import_module("config.settings")
    return cfg


def lint_and_type_check() -> None:
    """ruff (check, format), mypy ([tool.mypy] in pyproject.toml), the import contracts
    ([tool.importlinter]: which way the apps' dependencies go) and ESLint on the scripts,
    as a full run does."""
    venv_bin = Path(sys.executable).parent
    for lint in (["check", "."], ["format", "--check", "."]):
        if subprocess.run([venv_bin / "ruff", *lint], cwd=BASE_DIR).returncode != 0:
            raise LaunchError(f"ruff {' '.join(lint)} failed (run `make format`)")
    if subprocess.run([venv_bin / "mypy"], cwd=BASE_DIR).returncode != 0:
        raise LaunchError("mypy failed (run `.venv/bin/mypy` to see why)")
    if subprocess.run([venv_bin / "lint-imports"], cwd=BASE_DIR).returncode != 0:
        raise LaunchError(
            "lint-imports failed: an import goes against docs/architecture.md's layers"
        )
    # eslint.config.js: static/weft and tests/js (installed by launch/system.py).
    if subprocess.run([BASE_DIR / "node_modules" / ".bin" / "eslint"], cwd=BASE_DIR).returncode:
        raise LaunchError("eslint failed (run `npx eslint` to see why)")
