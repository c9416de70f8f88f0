"""Start the engine in a subprocess for tests (no Django here).

    from engine.testing import run_engine

    with run_engine("scripted") as base_url:          # "http://127.0.0.1:PORT"
        httpx.post(base_url + "/v1/completions", json={...})

    with run_engine("scripted", token_delay=0.01, fault={"status": 503}) as base_url: ...
    with run_engine("llama", max_logprobs=5) as base_url: ...

Keyword options become command-line flags of ``python -m engine``: ``foo_bar=value`` ->
``--foo-bar value``; dicts and lists are passed as JSON; True adds a bare flag; None and
False are left out. The process is killed on exit from the ``with`` block, and dies with
the parent process too (PR_SET_PDEATHSIG), so a killed test run leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
_REPO = Path(__file__).resolve().parent.parent


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _flags(opts: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in opts.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, dict | list):
            args += [flag, json.dumps(value)]
        else:
            args += [flag, str(value)]
    return args


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def run_engine(
    backend: str = "scripted", *, startup_timeout: float = 60.0, **opts: Any
) -> Iterator[str]:
    """Run ``python -m engine --backend BACKEND`` on a free loopback port; yield its URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "engine",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--backend",
        backend,
        *_flags(opts),
    ]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            cmd,
            cwd=_REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 -- no threads started yet here
        )
        try:
            deadline = time.monotonic() + startup_timeout
            while not _healthy(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    output = log.read().decode(errors="replace")[-4000:]
                    raise RuntimeError(f"engine did not start ({' '.join(cmd)}):\n{output}")
                time.sleep(0.05)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
