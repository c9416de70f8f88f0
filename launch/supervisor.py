"""Starting, watching, reviving and stopping child processes."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable
from typing import IO, Any

from launch import LaunchError
from launch.runtime import CHILD_UMASK, Runtime, child_setup, runtime
from launch.services import Restart, Service

Output = int | IO[Any] | None


class Supervisor:
    """`restart_delay`: how long after its exit a child is started again (systemd's
    RestartSec; `make run` waits 1 s as the units do): a database that has just died
    may still hold its files for a moment, and starting it again at once would spend
    the policy's burst on starts that fail."""

    def __init__(self, runtime_: Runtime | None = None, *, restart_delay: float = 0.0) -> None:
        self.children: list[tuple[str, subprocess.Popen, int]] = []
        self.runtime = runtime_ or runtime()
        self.restartable: dict[str, dict] = {}
        self.policies: dict[str, Restart] = {}
        self.restarts: dict[str, list[float]] = {}
        self.restart_delay = restart_delay
        self.exited_at: dict[int, float] = {}  # by pid: when revive() first saw it gone
        self.restarted: dict[str, int] = {}  # how often each child was started again

    def start(
        self,
        name: str,
        args: list[str],
        *,
        env_vars: dict | None = None,
        stop_signal: int = signal.SIGTERM,
        stdout: Output = None,
        stderr: Output = None,
        restart: bool | Restart | None = False,
        before: Callable[[], None] | None = None,
    ) -> subprocess.Popen:
        """Start one child; `restart` (True: the default policy) starts it again when
        it exits, on `revive()`. `before` runs before every start (a stale pid file
        to clear)."""
        if restart:
            self.restartable[name] = dict(
                args=args,
                env_vars=env_vars,
                stop_signal=stop_signal,
                stdout=stdout,
                stderr=stderr,
                before=before,
            )
            self.policies[name] = restart if isinstance(restart, Restart) else Restart()
        if before is not None:
            before()
        rt = self.runtime
        proc = subprocess.Popen(
            rt.command(args),
            cwd=rt.source,
            env=rt.child_env(env_vars),
            preexec_fn=child_setup(rt.user, stop_signal),
            start_new_session=True,  # Ctrl-C reaches the launcher only; it stops children in order
            stdout=stdout,
            stderr=stderr,
            umask=CHILD_UMASK,
        )
        self.children.append((name, proc, stop_signal))
        return proc

    def run(
        self, service: Service, env_vars: dict, *, stdout: Output = None, stderr: Output = None
    ) -> subprocess.Popen:
        """Start a service as `launch.services` describes it, on top of `env_vars`."""
        return self.start(
            service.name,
            list(service.command),
            env_vars={**env_vars, **service.env},
            stop_signal=service.stop_signal,
            stdout=stdout,
            stderr=stderr,
            restart=service.restart,
        )

    def exited(self) -> tuple[str, int] | None:
        for name, proc, _ in self.children:
            code = proc.poll()
            if code is not None:
                return name, code
        return None

    def revive(self) -> list[str]:
        """Start again the restartable children that exited — a Celery worker exits
        when its broker goes away at the wrong moment (kombu 5.7 on a Redis restart),
        an embedded Postgres or Redis when it is stopped or crashes — `restart_delay`
        after their exit, unless one keeps exiting (its policy's burst within its
        interval: `down()` then names it). Returns the names started again."""
        revived = []
        for entry in list(self.children):
            name, proc, _ = entry
            if proc.poll() is None or name not in self.restartable:
                continue
            now = time.monotonic()
            if now - self.exited_at.setdefault(proc.pid, now) < self.restart_delay:
                continue
            if self._spent(name, now):
                continue
            self.restarts[name] = [*self._recent(name, now), now]
            self.restarted[name] = self.restarted.get(name, 0) + 1
            self.children.remove(entry)
            self.exited_at.pop(proc.pid, None)
            try:
                self.start(name, **self.restartable[name], restart=self.policies[name])
            except (OSError, LaunchError):  # counted: the next revive tries again
                self.children.append(entry)
                continue
            revived.append(name)
        return revived

    def _recent(self, name: str, now: float) -> list[float]:
        return [t for t in self.restarts.get(name, []) if now - t < self.policies[name].interval]

    def _spent(self, name: str, now: float) -> bool:
        return len(self._recent(name, now)) >= self.policies[name].burst

    def exit_code(self, name: str) -> int | None:
        """The code of `name`'s last exit (None: it runs, or was never started)."""
        for child, proc, _ in self.children:
            if child == name:
                return proc.poll()
        return None

    def down(self) -> str | None:
        """Why a child that exited stays down — it has no restart policy, or it exited
        its policy's burst of times within its interval — or None while every child
        runs or is about to be started again."""
        now = time.monotonic()
        for name, proc, _ in self.children:
            code = proc.poll()
            if code is None:
                continue
            if name not in self.restartable:
                return f"{name} exited with code {code}"
            if self._spent(name, now):
                policy = self.policies[name]
                return (
                    f"{name} keeps exiting: started again {policy.burst} times within "
                    f"{policy.interval:.0f} s, and it exited again with code {code}"
                )
        return None

    def stop(self, name: str, timeout: float = 5.0) -> None:
        """Stop one child by name (its stop signal, then SIGKILL) and forget it."""
        for entry in [c for c in self.children if c[0] == name]:
            _stop(entry[1], entry[2], timeout)
            self.children.remove(entry)

    def stop_all(self, timeout: float = 5.0) -> None:
        # Reverse start order: web and workers first, databases last.
        for _name, proc, sig in reversed(self.children):
            _stop(proc, sig, timeout)
        self.children.clear()


def _stop(proc: subprocess.Popen, sig: int, timeout: float) -> None:
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


def wait_ready(
    service: Service, proc: subprocess.Popen, *, host: str = "127.0.0.1", log: Any = None
) -> None:
    """Wait until `service` passes its readiness check (`log`: the file its output goes
    to, for a check by line)."""
    check = service.ready
    if check is None:
        return
    if check.path:
        import httpx

        url = f"http://{host}:{service.port}{check.path}"
        wait_for(service.name, lambda: httpx.get(url, timeout=3).is_success, proc, check.timeout)
    elif check.line:
        if log is None:
            raise LaunchError(f"{service.name}: readiness by its output needs its log file")
        needle = check.line.encode()
        wait_for(service.name, lambda: needle in log.read_bytes(), proc, check.timeout)
