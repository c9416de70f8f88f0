"""`run` and `test`: what `make run` and `make test` do, step by step."""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from django.core.exceptions import ImproperlyConfigured

from config import env
from launch import LaunchError, say, services
from launch.checks import check_environment, lint_and_type_check
from launch.datadir import (
    PASSWORD_FILE,
    data_dir,
    hold_lock,
    metrics_dir,
    prepare_data_dir,
    reset_metrics_dir,
    scratch_dir,
    use_data_dir,
    write_private,
)
from launch.embedded import ensure_database, start_postgres, start_redis
from launch.runtime import BASE_DIR, CHILD_UMASK, child_setup, runtime
from launch.supervisor import Supervisor, port_free, wait_ready
from launch.system import ensure_chromium, ensure_nginx, ensure_node, ensure_node_modules


def manage(child_env: dict, *args: str, capture: bool = False) -> str:
    """`manage.py ARGS` as the children run (same user, source and environment)."""
    rt = runtime()
    result = subprocess.run(
        rt.command([sys.executable, "manage.py", *args]),
        cwd=rt.source,
        env=rt.child_env(child_env),
        capture_output=capture,
        text=True,
        preexec_fn=child_setup(rt.user, signal.SIGKILL),
        umask=CHILD_UMASK,
    )
    if result.returncode != 0:
        detail = (result.stderr or "").strip().splitlines()[-1:] if capture else []
        raise LaunchError(f"manage.py {' '.join(args)} failed {' '.join(detail)}".strip())
    return result.stdout or ""


_ACCOUNT = re.compile(r"^username: (?P<user>\S+)  password: (?P<password>\S+)$")


def show_local_account(line: str, data: Path, out: TextIO) -> None:
    """The local account's line from `weft_local_account`. On a terminal it is shown as
    it is (a new user needs the password); anywhere else — a service's log, a pipe —
    the password goes to a 0600 file in the data dir and only that file is named."""
    match = _ACCOUNT.match(line)
    if match is None or out.isatty():
        print(line, file=out, flush=True)
        return
    path = data / PASSWORD_FILE
    write_private(path, match["password"])
    print(f"username: {match['user']}  password: in {path}", file=out, flush=True)


def cmd_run() -> int:
    rt = runtime()
    data = data_dir(rt)
    use_data_dir(data)
    cfg = check_environment()  # first: a bad variable is the one line to show
    prepare_data_dir(data, rt)
    lock = hold_lock(data / "launcher.lock")  # noqa: F841 - released when the process dies
    if not port_free(cfg["host"], cfg["port"]):
        raise LaunchError(
            f"port {cfg['port']} on {cfg['host']} is in use by another program; set WEFT_PORT"
        )
    if cfg["engine"] and not port_free("127.0.0.1", cfg["engine_port"]):
        raise LaunchError(
            f"port {cfg['engine_port']} (local engine) is in use by another program; set WEFT_ENGINE_PORT"
        )

    started = time.monotonic()
    # Every child under one policy, the embedded Postgres and Redis too, started again
    # 1 s after an exit as the systemd units do (RestartSec=1).
    sup = Supervisor(rt, restart_delay=1.0)
    policy = services.Restart()
    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    child_env = dict(os.environ)
    child_env["PROMETHEUS_MULTIPROC_DIR"] = str(reset_metrics_dir(metrics_dir(data), rt))
    try:
        if not cfg["database_url"]:
            start_postgres(sup, data / "pg", durable=True, restart=policy)
            ensure_database(data / "pg", "weft")
            child_env["DATABASE_URL"] = env.embedded_database_url()
        if not cfg["redis_url"]:
            child_env["REDIS_URL"] = start_redis(
                sup, data / "redis.sock", persist=True, restart=policy
            )
        if cfg["engine"]:
            engine = services.engine(
                sys.executable, cfg["engine_port"], cfg["engine_threads"], cfg["engine_model"]
            )
            wait_ready(engine, sup.run(engine, child_env))
            child_env["WEFT_BACKEND_URL"] = f"http://127.0.0.1:{cfg['engine_port']}/v1"
        manage(child_env, "migrate", "--noinput", capture=True)
        account = manage(child_env, "weft_local_account", capture=True).strip()
        show_local_account(account, data, sys.stdout)

        host = cfg["host"]
        app = services.app_services(
            sys.executable,
            host=host,
            web_ports=[cfg["port"]],
            prefix=cfg["queue_prefix"],
            interactive_threads=cfg["worker_concurrency"],
            bulk_threads=cfg["bulk_concurrency"],
            schedule=str(data / "celerybeat-schedule"),
        )
        started_procs = [(service, sup.run(service, child_env)) for service in app]
        web, web_proc = started_procs[0]
        wait_ready(web, web_proc, host=host)
        say(
            f"ready at http://{host}:{cfg['port']}/ after {time.monotonic() - started:.1f} s — Ctrl-C stops everything"
        )
        while not stopping:
            codes = {name: sup.exit_code(name) for name in sup.restartable}
            for name in sup.revive():
                times = sup.restarted[name]
                say(f"{name} exited with code {codes[name]}; started it again "
                    f"({times} time{'s' if times != 1 else ''} since Weft started)")  # fmt: skip
            down = sup.down()
            if down:
                say(f"{down}; stopping")
                return 1
            time.sleep(0.2)
        return 0
    finally:
        say("stopping")
        sup.stop_all()


def cmd_test(pytest_args: list[str]) -> int:
    # Before the settings are read (they set it to the default for this process).
    metrics_given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    cfg = check_environment()
    # A full run lints and type-checks first; `make test ARGS=tests/x` (a developer's
    # focused run) does not.
    if not pytest_args:
        ensure_node_modules()
        lint_and_type_check()
    ensure_chromium()
    ensure_node()
    ensure_nginx()

    rt = runtime()
    sup = Supervisor(rt)
    scratch = scratch_dir("weft-test-")
    child_env = dict(os.environ)
    child_env.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # pytest and the processes the tests start must share one key (sessions), and
    # children run as the service user keep whatever they write in the scratch dir.
    child_env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    child_env.setdefault("WEFT_DATA_DIR", str(scratch))
    # Made here, the service user's: the processes the tests start write their metrics there.
    metrics = Path(metrics_given or scratch / "metrics")
    child_env["PROMETHEUS_MULTIPROC_DIR"] = str(reset_metrics_dir(metrics, rt))

    def interrupted(signum, frame):
        raise KeyboardInterrupt  # a CI timeout's SIGTERM tears services down like Ctrl-C

    signal.signal(signal.SIGTERM, interrupted)
    try:
        started = time.monotonic()
        if not cfg["database_url"]:
            start_postgres(sup, scratch / "pg", durable=False)
            child_env["DATABASE_URL"] = f"postgresql://postgres@/weft?host={scratch / 'pg'}"
        if not cfg["redis_url"]:
            child_env["REDIS_URL"] = start_redis(sup, scratch / "redis.sock", persist=False)
        say(f"test services up in {time.monotonic() - started:.1f} s")
        return subprocess.run(
            [sys.executable, "-m", "pytest", *pytest_args], cwd=BASE_DIR, env=child_env
        ).returncode
    except KeyboardInterrupt:
        return 130
    finally:
        sup.stop_all()
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="weft")
    parser.add_argument("command", choices=["run", "test"])
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run()
        return cmd_test(args.pytest_args or [])
    except (ImproperlyConfigured, LaunchError) as exc:
        say(str(exc))
        return 2
    except subprocess.CalledProcessError as exc:
        say(f"{' '.join(map(str, exc.cmd))} failed with code {exc.returncode}")
        return 2
