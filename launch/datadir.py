"""The data dir and what the launcher keeps in it: its lock, the metrics dir of the
processes (prometheus_client's multiprocess files), the local account's password
when there is no terminal to show it on, and private files generally.

The data dir belongs to the service user (as root, `weft`), who could plant links in
it: everything here opens by descriptor and never follows one."""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Any

from config import env
from launch import LaunchError, say
from launch.runtime import BASE_DIR, Runtime, _key, closed_folder, give_to, runtime

METRICS_DIR = "metrics"
PASSWORD_FILE = "local-account-password"


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


def hold_lock(path: Path) -> IO[Any]:
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


def reset_metrics_dir(path: Path, rt: Runtime) -> Path:
    """The metrics dir (PROMETHEUS_MULTIPROC_DIR) emptied for the processes about to
    start: the files of the last run's processes would otherwise count forever. Only
    prometheus_client's own files (*.db) are removed: the folder may be the operator's."""
    if path.is_symlink():
        path.unlink()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in os.listdir(folder):
            if name.endswith(".db"):
                os.unlink(name, dir_fd=folder)
        if rt.user is not None:
            os.fchown(folder, rt.user.pw_uid, rt.user.pw_gid)
        os.fchmod(folder, 0o700)
    finally:
        os.close(folder)
    return path


def metrics_dir(data: Path) -> Path:
    """PROMETHEUS_MULTIPROC_DIR, else <data>/metrics (as config/settings.py reads it)."""
    return Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or data / METRICS_DIR)


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text`, readable by its owner only from the first byte."""
    if path.is_symlink():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(text + "\n")
