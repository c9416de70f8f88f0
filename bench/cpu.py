"""CPU time of the processes a bench starts, from Linux' /proc: a figure that other
load on the machine disturbs far less than wall-clock time."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system CPU seconds of each process so far; a name ending in "+" counts its
    children too (PostgreSQL's backends: the pid given is the postmaster's)."""
    tick = os.sysconf("SC_CLK_TCK")
    times = {}
    for name, pid in pids.items():
        family = _family(pid) if name.endswith("+") else [pid]
        times[name] = sum(_ticks(each) for each in family) / tick
    return times


def _ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0  # ended meanwhile
    return int(fields[11]) + int(fields[12])


def _family(pid: int) -> list[int]:
    family = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except OSError:
                continue
            if parent == pid:
                family.append(int(entry.name))
    return family


def pid_serving(url: str) -> int:
    """The process started with ``--port`` this URL's port (an engine of run_engine)."""
    port = url.rsplit(":", 1)[1].encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--port" in args and args[args.index(b"--port") + 1 :][:1] == [port]:
            return int(entry.name)
    raise RuntimeError(f"no process serves {url}")
