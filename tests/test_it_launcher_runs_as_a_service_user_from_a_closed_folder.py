"""As root, in a clone inside a folder nobody else may enter (0700): `run` starts every
child — Postgres, Redis, the engine, web, worker, beat — as the dedicated user `weft`
(never root, never a shared user), loosens no folder on the way, keeps its data 0700
with 0600 files, and `test` works there too.

The clone is a copy of the source with its .venv a symlink to this one (a full
install would take minutes): `make test` runs as is; `run` is started as `make run`
starts it (directly, so that the test can tell the launcher from its children)."""

import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from launch.runtime import _NOT_SOURCE, SERVICE_USER
from tests.support import BASE_DIR, free_port, wait_until
from tests.test_it_launcher_lifecycle import Launcher, port_closed

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the root case")


def modes_on_the_way(path: Path) -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_mode, p.stat().st_uid) for p in [*path.parents, path]}


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def real_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(pid)


@pytest.fixture
def closed_clone():
    outer = Path(tempfile.mkdtemp(prefix="weft-closed-"))  # 0700, root's
    clone = outer / "weft"
    shutil.copytree(BASE_DIR, clone, ignore=_NOT_SOURCE, symlinks=True)
    (clone / ".venv").symlink_to(sys.prefix)
    before = modes_on_the_way(clone)
    yield clone, before
    shutil.rmtree(outer, ignore_errors=True)


def clean_env(**extra: str) -> dict[str, str]:
    drop = ("DATABASE_URL", "REDIS_URL", "WEFT_BACKEND_URL", "WEFT_DATA_DIR", "SECRET_KEY")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYTEST")}
    env.update(extra)
    return env


@pytest.mark.slow
def test_it_runs_every_child_as_the_service_user(closed_clone):
    clone, before = closed_clone
    assert stat.S_IMODE(clone.parent.stat().st_mode) == 0o700
    port, engine_port = free_port(), free_port()
    env = clean_env(WEFT_PORT=str(port), WEFT_ENGINE_PORT=str(engine_port),
                    WEFT_WORKER_CONCURRENCY="2", WEFT_ENGINE_THREADS="1")  # fmt: skip
    launcher = Launcher(env, python=str(clone / ".venv/bin/python"), cwd=clone)
    data = None
    try:
        wait_until(
            lambda: launcher.find("ready at") or launcher.proc.poll() is not None, 150, "run"
        )
        assert launcher.find("ready at"), launcher.lines
        moved = launcher.find(r"data in (/var/lib/weft/\S+)")
        assert moved, launcher.lines
        data = Path(moved[1])
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=10)
        assert health.status_code == 200 and health.json()["status"] == "ok", health.text

        weft = pwd.getpwnam(SERVICE_USER)
        seen = {}  # pid: (command line, real uid), for the processes alive now
        for pid in descendants(launcher.proc.pid):
            try:
                seen[pid] = (Path(f"/proc/{pid}/cmdline").read_bytes(), real_uid(pid))
            except FileNotFoundError:  # a short-lived one (a Postgres backend) ended
                continue
        for needle in (b"postgres", b"redis-server", b"engine", b"uvicorn", b"worker", b"beat"):
            assert any(needle in command for command, _ in seen.values()), (needle, seen)
        assert {uid for _, uid in seen.values()} == {weft.pw_uid}, seen

        assert modes_on_the_way(clone) == before  # nothing loosened on the way
        assert stat.S_IMODE(data.stat().st_mode) == 0o700 and data.stat().st_uid == weft.pw_uid
        files = [p for p in data.iterdir() if p.is_file()]
        assert {p.name for p in files} >= {"secret_key", "pg.log"}
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), files
        hba = (data / "pg" / "pg_hba.conf").read_text()
        assert "trust" in hba and "reject" in hba  # trust on the private socket only

        launcher.proc.send_signal(signal.SIGINT)
        launcher.proc.wait(timeout=20)
        wait_until(lambda: port_closed(port) and port_closed(engine_port), 10, "ports closed")
    finally:
        if launcher.proc.poll() is None:
            launcher.proc.kill()
        if data is not None:
            shutil.rmtree(data, ignore_errors=True)


def test_it_runs_the_tests_there(closed_clone):
    clone, before = closed_clone
    stamp = Path(sys.prefix) / ".installed"
    inputs = [
        BASE_DIR / name for name in ("pyproject.toml", "constraints.txt", "scripts/find-python")
    ]
    if not shutil.which("make") or not stamp.exists():
        pytest.skip("no make, or a venv not installed by it")
    if any(path.stat().st_mtime > stamp.stat().st_mtime for path in inputs):
        # make would reinstall — into this venv, through the clone's symlink.
        pytest.skip("the venv is older than pyproject.toml: run `make install` first")
    # copytree kept the files' times, so the venv's install stamp is still newer than
    # pyproject.toml and `make` goes straight to the launcher, as in a real clone.
    result = subprocess.run(
        ["make", "test", "ARGS=tests/test_it_health.py -q -k every_service_up"],
        cwd=clone, env=clean_env(), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout
    assert modes_on_the_way(clone) == before


def test_it_follows_no_link_the_service_user_plants_in_its_data_dir(tmp_path):
    from launch.datadir import prepare_data_dir
    from launch.embedded import start_postgres
    from launch.runtime import runtime
    from launch.supervisor import Supervisor

    rt = runtime()
    data = Path(tempfile.mkdtemp(prefix="weft-links-"))
    victim = tmp_path / "root-only"
    victim.write_text("secret")
    victim.chmod(0o644)
    try:
        prepare_data_dir(data, rt)
        # What a compromised service process could leave for root's next start:
        (data / "secret_key").symlink_to(victim)
        (data / "pg").symlink_to(tmp_path)
        before = tmp_path.stat()
        prepare_data_dir(data, rt)
        with pytest.raises(OSError):  # the Postgres folder is a link: refused, not followed
            start_postgres(Supervisor(rt), data / "pg", durable=False)
        assert victim.stat().st_uid == 0 and stat.S_IMODE(victim.stat().st_mode) == 0o644
        after = tmp_path.stat()
        assert (after.st_uid, after.st_mode) == (before.st_uid, before.st_mode)
    finally:
        shutil.rmtree(data, ignore_errors=True)
