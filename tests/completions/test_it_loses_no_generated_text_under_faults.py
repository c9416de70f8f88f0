"""The whole pipeline under one fault at a time, mid-run, with real processes this test
owns — Postgres, Redis, the scripted engine, the ASGI server and a Celery worker: a run
started from the Workbench over HTTP, watched over its WebSocket, then

- the worker is SIGKILLed:  the checkpoint is kept, marked interrupted (worker_lost);
                            at most a checkpoint interval of tokens is lost with it;
- Redis is restarted:       the run ends done, complete;
- Postgres is restarted:    the run ends done, complete (checkpoints and the final
                            save wait the restart out);
- the stream is cut:        every token that arrived is kept (failed, stream_incomplete);
- the backend times out:    every token that arrived is kept (failed, timeout).

Every saved text is a prefix of what the engine generates for the same seeded request,
and the budget balances: nothing stays reserved, and what is used is what was saved.
"""

import asyncio
import os
import re
import secrets
import shutil
import signal
import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from engine.testing import run_engine
from launch.commands import manage
from launch.datadir import scratch_dir
from launch.embedded import ensure_database, start_postgres, start_redis
from launch.runtime import runtime
from tests.completions.wsclient import Watcher, watch
from tests.support import Supervisor, free_port, start_web, start_worker, wait_until

TOKEN_DELAY = 0.02  # 50 tokens a second
CHECKPOINT_INTERVAL = 0.2
READ_TIMEOUT = 1.5
PROMPT = "Once upon a time"


class Stack:
    """Services the test can stop and start again, and the app processes on them."""

    def __init__(self) -> None:
        self.scratch = scratch_dir("weft-faults-")
        self.rt = runtime()
        self.services = Supervisor(self.rt)
        self.app = Supervisor(self.rt)
        self.pg = self.scratch / "pg"
        self.sock = self.scratch / "redis.sock"
        self.worker = None

    def start_postgres(self) -> None:
        start_postgres(self.services, self.pg, durable=False)

    def start_redis(self) -> None:
        start_redis(self.services, self.sock, persist=False)

    def restart(self, name: str) -> None:
        for entry in list(self.services.children):
            child, proc, sig = entry
            if child == name:
                proc.send_signal(sig)
                proc.wait(timeout=15)
                self.services.children.remove(entry)
        {"postgres": self.start_postgres, "redis": self.start_redis}[name]()

    def start_worker(self) -> None:
        log = self.scratch / f"worker-{time.monotonic_ns()}.log"
        # Restartable, as `make run` starts it: kombu 5.7's worker exits when Redis goes
        # away at the wrong moment, and the supervisor starts it again.
        self.worker = start_worker(self.app, self.env, log, concurrency=2, restart=True)

    def db(self) -> psycopg.Connection:
        return psycopg.connect(f"host={self.pg} user=postgres dbname=weft", autocommit=True)

    def supervise(self) -> None:
        """What the launcher's loop does: start again a worker a fault took down."""
        self.supervising = threading.Event()

        def loop() -> None:
            while not self.supervising.wait(0.2):
                self.app.revive()

        self.supervisor = threading.Thread(target=loop, daemon=True)
        self.supervisor.start()

    def stop(self) -> None:
        if getattr(self, "supervisor", None):
            self.supervising.set()
            self.supervisor.join(5)
        self.app.stop_all()
        self.services.stop_all()
        shutil.rmtree(self.scratch, ignore_errors=True)


@pytest.fixture(scope="module")
def stack():
    stack = Stack()
    try:
        with run_engine("scripted") as engine:
            stack.engine = engine
            stack.start_postgres()
            ensure_database(stack.pg, "weft")
            stack.start_redis()
            stack.env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "DATABASE_URL": f"postgresql://postgres@/weft?host={stack.pg}",
                "REDIS_URL": f"unix://{stack.sock}",
                "WEFT_BACKEND_URL": f"{engine}/v1",
                "WEFT_BACKEND_READ_TIMEOUT": str(READ_TIMEOUT),
                "WEFT_BACKEND_MAX_RETRIES": "0",
                "WEFT_CHECKPOINT_INTERVAL_SECONDS": str(CHECKPOINT_INTERVAL),
                "WEFT_GENERATION_STALE_SECONDS": "2",
                "WEFT_GENERATION_QUEUE": "faults",
                "WEFT_DATA_DIR": str(stack.scratch),
                "SECRET_KEY": secrets.token_urlsafe(50),
            }
            manage(stack.env, "migrate", "--noinput", capture=True)
            account = manage(stack.env, "weft_local_account", capture=True)
            stack.username, stack.password = re.search(
                r"username: (\S+)  password: (\S+)", account
            ).groups()
            stack.url = start_web(stack.app, stack.env, free_port())
            stack.start_worker()
            if stack.rt.user is not None:  # run as root: the app runs as the service user
                assert Path(f"/proc/{stack.worker.pid}").stat().st_uid == stack.rt.user.pw_uid
            stack.supervise()
            yield stack
    finally:
        stack.stop()


def log_in(stack: Stack) -> httpx.Client:
    http = httpx.Client(base_url=stack.url, timeout=10)
    form = http.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    done = http.post(
        "/login/",
        data={"username": stack.username, "password": stack.password, "csrfmiddlewaretoken": token},
    )
    assert done.status_code == 302
    return http


BODY = {"model": "scripted", "prompt": PROMPT, "seed": 7, "logprobs": 1}


def expected_tokens(stack: Stack, max_tokens: int) -> list[str]:
    """What the engine generates for the run's request, read directly (no fault)."""
    answer = httpx.post(
        f"{stack.engine}/v1/completions", json={**BODY, "max_tokens": max_tokens}, timeout=30
    )
    return answer.json()["choices"][0]["logprobs"]["tokens"]


def start_run(http: httpx.Client, max_tokens: int) -> int:
    fields = {**BODY, "max_tokens": max_tokens}
    response = http.post(
        "/workbench/run/",
        data={name: str(value) for name, value in fields.items()},
        headers={"X-CSRFToken": http.cookies["csrftoken"], "HX-Request": "true"},
    )
    assert response.status_code == 200, response.text[:500]
    return int(re.search(r"gen-(\d+)-", response.text).group(1))


def row(stack: Stack, generation_id: int) -> dict:
    with stack.db() as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute("SELECT * FROM completions_generation WHERE id = %s", [generation_id])
        return cur.fetchone()


def balance(stack: Stack) -> tuple[int, int, int]:
    with stack.db() as conn:
        reserved, used = conn.execute(
            "SELECT sum(reserved), sum(used) FROM completions_budgetmonth"
        ).fetchone()
        (charged,) = conn.execute(
            "SELECT coalesce(sum(charged_tokens), 0) FROM completions_generation"
        ).fetchone()
    return reserved, used, charged


def kill_worker(stack: Stack, http: httpx.Client, generation_id: int) -> None:
    stack.worker.kill()  # SIGKILL: nothing runs in the worker any more
    stack.worker.wait()
    time.sleep(2.5)  # past the stale limit
    # A page asking about a run whose worker stopped beating marks it interrupted.
    assert http.get(f"/generations/{generation_id}/result/").status_code == 200


def stop_engine(stack: Stack, http, generation_id: int) -> None:
    pid = int(
        next(
            p.name
            for p in Path("/proc").iterdir()
            if p.name.isdigit()
            and b"engine" in (p / "cmdline").read_bytes()
            and stack.engine.rsplit(":", 1)[1].encode() in (p / "cmdline").read_bytes()
        )
    )
    os.kill(pid, signal.SIGSTOP)  # the backend goes quiet mid-stream
    try:
        wait_until(lambda: row(stack, generation_id)["state"] != "running", 15, "the timeout")
    finally:
        os.kill(pid, signal.SIGCONT)


FAULTS = {
    # name: (scripted fault, max_tokens, tokens seen before the fault, the fault,
    #        expected state, expected error code, whether the text must be complete)
    "worker SIGKILL": ({"token_delay": TOKEN_DELAY}, 300, 30, kill_worker, "interrupted",
                       "worker_lost", False),
    "Redis restart": ({"token_delay": TOKEN_DELAY}, 120, 20,
                      lambda s, h, g: s.restart("redis"), "done", "", True),
    "Postgres restart": ({"token_delay": TOKEN_DELAY}, 120, 20,
                         lambda s, h, g: s.restart("postgres"), "done", "", True),
    "stream cut": ({"token_delay": TOKEN_DELAY, "cut_after": 40}, 120, 0, None, "failed",
                   "stream_incomplete", False),
    "backend timeout": ({"token_delay": TOKEN_DELAY}, 300, 20, stop_engine, "failed",
                        "timeout", False),
}  # fmt: skip


@pytest.mark.parametrize("fault", list(FAULTS))
def test_it_keeps_what_reached_the_worker(stack, fault):
    scripted, max_tokens, seen_before, act, state, code, complete = FAULTS[fault]
    expected = expected_tokens(stack, max_tokens)
    httpx.post(f"{stack.engine}/_scripted/faults", json={"faults": [scripted]}).raise_for_status()
    http = log_in(stack)
    generation_id = start_run(http, max_tokens)

    watcher, stop = Watcher(), threading.Event()

    def listen() -> None:
        try:
            asyncio.run(
                watch(stack.url, http.cookies["sessionid"], generation_id, watcher,
                      until_final=False, timeout=60, stop=stop)
            )  # fmt: skip
        except Exception:  # a Redis restart closes the page's socket: what it saw stays
            pass

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    try:
        if act is not None:
            wait_until(
                lambda: watcher.count() >= seen_before,
                30,
                f"{seen_before} tokens (run {row(stack, generation_id)['state']})",
            )
            # The socket may join after the first tokens (the page then re-reads the
            # result): what it saw streamed is a stretch of what the worker published.
            published = "".join(watcher.tokens.get(0, []))
            act(stack, http, generation_id)
        else:
            published = ""
        final = wait_until(
            lambda: (r := row(stack, generation_id))["state"] not in ("queued", "running") and r,
            60,
            "a terminal state",
        )
    finally:
        stop.set()
        listener.join(5)

    assert final["state"] == state, (final["state"], final["error_code"])
    assert final["error_code"] == code
    choice = final["choices"][0]
    saved = (choice.get("logprobs") or {}).get("tokens") or []
    assert choice["text"] == "".join(saved)
    assert saved == expected[: len(saved)]  # what was kept is what the engine sent
    if complete:
        assert saved == expected and choice["finish_reason"] == "length"
    else:
        assert choice["finish_reason"] is None and 0 < len(saved) < len(expected)
    if fault == "stream cut":
        assert len(saved) == 40  # every token that arrived before the cut
    elif fault == "worker SIGKILL":
        # Only what arrived after the last checkpoint can go with the process.
        lost = len(watcher.text(0)) - len(choice["text"])
        assert lost <= (CHECKPOINT_INTERVAL / TOKEN_DELAY + 10) * 8, lost
    else:
        assert published in choice["text"]  # nothing the worker published is lost

    usage = final["usage"]
    assert usage["completion_tokens"] == len(saved)
    assert final["charged_tokens"] == usage["prompt_tokens"] + len(saved)
    assert final["reserved_tokens"] == 0 and final["settled_at"] is not None
    reserved, used, charged = balance(stack)
    assert reserved == 0 and used == charged
