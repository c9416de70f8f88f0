"""Who children run as, and from where.

Every child is started with PR_SET_PDEATHSIG, so a `kill -9` of the launcher takes
its children with it and the next start finds nothing in the way.

Started as root, every child (Postgres, Redis, the engine, migrate, the web server,
the workers, beat, nginx in the topology test) runs as the dedicated system user
`weft` (created once), never as root and never as a shared user such as `nobody`. No
folder of the user's is loosened for it: whatever `weft` cannot reach (the
interpreter under /root/.pyenv, a venv or a clone inside a 0700 folder) is mirrored
into /var/cache/weft (root:weft 0750) — hard links, so a second start reuses the
mirror and the first costs a second or two — and the children run from there. See
`Runtime`.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from config import env
from launch import LaunchError, say

BASE_DIR = env.BASE_DIR
PR_SET_PDEATHSIG = 1
SERVICE_USER = "weft"
CACHE_ROOT = Path("/var/cache/weft")
# Children create files (beat's schedule, Redis's dump, logs) private to their user.
CHILD_UMASK = 0o077
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", ".data", ".artifacts", "__pycache__", "*.pyc", "node_modules"
)


def child_setup(run_as: pwd.struct_passwd | None, death_signal: int) -> Callable[[], None]:
    """The preexec_fn of every child: drop to `run_as`, then die with the launcher."""
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

        def copy_source(dest: Path) -> None:
            shutil.copytree(BASE_DIR, dest, ignore=_NOT_SOURCE, symlinks=True)

        runtime.source = _materialise(f"source-{_key(str(BASE_DIR), files)}", copy_source)
    home = CACHE_ROOT / f"home-{user.pw_name}"
    (home / "data").mkdir(mode=0o700, parents=True, exist_ok=True)
    give_to(home, user)
    home.chmod(0o700)
    # HOME for caches; the data dir (secret key) for children started without one.
    runtime.env.update(HOME=str(home), WEFT_DATA_DIR=str(home / "data"))
    return runtime


def _source_files(root: Path) -> Iterator[Path]:
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
