"""CPU time of the processes a bench starts, from Linux' /proc: a figure that other
load on the machine disturbs far less than wall-clock time."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system CPU seconds of each process so far."""
    tick = os.sysconf("SC_CLK_TCK")
    times = {}
    for name, pid in pids.items():
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        times[name] = (int(fields[11]) + int(fields[12])) / tick
    return times


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
