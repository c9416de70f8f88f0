"""The whole pipeline under one fault at a time, mid-run, with real processes this test
owns — Postgres, Redis, the scripted engine, the ASGI server and a Celery worker: a run
started from the Workbench over HTTP, watched over its WebSocket — and beside it an
API job and a Batch prompt, each of the three met by the same fault — then

- the worker is SIGKILLed:  the checkpoint is kept, marked interrupted (worker_lost);
                            at most a checkpoint interval of tokens is lost with it;
- Redis is restarted:       the run ends done, complete;
- Postgres is restarted:    the run ends done, complete (checkpoints and the final
                            save wait the restart out);
- the stream is cut:        every token that arrived is kept (failed, stream_incomplete);
- the backend times out:    every token that arrived is kept (failed, timeout).

Every saved text is a prefix of what the engine generates for the same seeded request,
and the budget balances: nothing stays reserved, and what is used is what was saved.
The job and the Batch prompt are run again when their worker dies (their lanes give
them more than one attempt: beat's stale sweep queues them again) and end complete,
as they do through a Redis or a Postgres restart; a cut or a silent backend fails them,
charged their prompt alone.
"""

import asyncio
import os
import re
import signal
import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from launch.commands import manage
from tests.completions.wsclient import Watcher, watch
from tests.faultstack import Stack, log_in, running_stack
from tests.support import wait_until

TOKEN_DELAY = 0.02  # 50 tokens a second
CHECKPOINT_INTERVAL = 0.2
READ_TIMEOUT = 3.0  # a job or Batch prompt waits this long for its whole JSON answer
SIDE_TOKENS = 100  # the job's and the Batch prompt's: 2 s at TOKEN_DELAY
PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def stack():
    with running_stack(
        WEFT_BACKEND_READ_TIMEOUT=str(READ_TIMEOUT),
        WEFT_BACKEND_MAX_RETRIES="0",
        WEFT_CHECKPOINT_INTERVAL_SECONDS=str(CHECKPOINT_INTERVAL),
        WEFT_GENERATION_STALE_SECONDS="2",
        WEFT_GENERATION_QUEUE="faults",
    ) as stack:
        yield stack


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


def balance(stack: Stack) -> dict[str, int]:
    """What the ledger's accounts hold against what the runs were charged: the pages'
    (page runs and Batch prompts) and the API's (the user's allowance and the key)."""
    with stack.db() as conn:
        out = dict(
            conn.execute(
                "SELECT split_part(account, ':', 1), sum(used) FROM completions_budgetmonth "
                "GROUP BY 1"
            ).fetchall()
        )
        (out["reserved"],) = conn.execute(
            "SELECT sum(reserved) FROM completions_budgetmonth"
        ).fetchone()
        for name, kinds in (("pages charged", "kind <> 'job'"), ("jobs charged", "kind = 'job'")):
            (out[name],) = conn.execute(
                f"SELECT coalesce(sum(charged_tokens), 0) FROM completions_generation "  # noqa: S608
                f"WHERE {kinds}"
            ).fetchone()
    return out


@pytest.fixture(scope="module")
def api(stack: Stack) -> httpx.Client:
    """/v1 with a key of the stack's user."""
    made = manage(stack.env, "weft_api_key", "create", stack.username, capture=True)
    secret = made.strip().splitlines()[-1]
    return httpx.Client(base_url=f"{stack.url}/v1", timeout=30,
                        headers={"Authorization": f"Bearer {secret}"})  # fmt: skip


def submit_job(api: httpx.Client) -> str:
    body = {**BODY, "max_tokens": SIDE_TOKENS}
    made = api.post("/completions", json=body, headers={"Prefer": "respond-async"})
    assert made.status_code == 202, made.text
    return made.json()["id"]


def upload_batch(http: httpx.Client) -> int:
    page = http.get("/batch/").text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    fields = {"model": "scripted", "n": "1", "max_tokens": str(SIDE_TOKENS), "seed": "7",
              "format": "text", "title": "under a fault", "csrfmiddlewaretoken": token}  # fmt: skip
    made = http.post("/batch/new/", data=fields, files={"file": ("one.txt", PROMPT.encode())},
                     headers={"Referer": f"{http.base_url}batch/"})  # fmt: skip
    assert made.status_code == 302, made.text[-800:]
    return int(made.headers["location"].strip("/").split("/")[-1])


def side_runs(stack: Stack, job_id: str, batch_id: int) -> tuple[dict, dict]:
    """The job's run and the Batch prompt's item, once both have ended."""

    def ended():
        with stack.db() as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
            cur.execute("SELECT * FROM completions_generation WHERE public_id = %s", [job_id])
            job = cur.fetchone()
            cur.execute("SELECT * FROM batch_batchitem WHERE batch_id = %s", [batch_id])
            item = cur.fetchone()
        done = job["state"] not in ("queued", "running") and item["state"] in ("done", "failed")
        return done and (job, item)

    return wait_until(ended, 90, "the job and the Batch prompt ended")


def sweep(stack: Stack) -> None:
    """What beat does every WEFT_JOB_SWEEP_SECONDS: runs whose worker died."""
    code = "from completions import lifecycle; print(lifecycle.recover_stale())"
    manage(stack.env, "shell", "-c", code, capture=True)


def kill_worker(stack: Stack, http: httpx.Client, generation_id: int) -> None:
    stack.worker.kill()  # SIGKILL: nothing runs in the worker any more
    stack.worker.wait()
    time.sleep(2.5)  # past the stale limit
    # A page asking about a run whose worker stopped beating marks it interrupted.
    assert http.get(f"/generations/{generation_id}/result/").status_code == 200
    sweep(stack)  # the job and the Batch prompt are queued again


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
def test_it_keeps_what_reached_the_worker(stack, api, fault):
    scripted, max_tokens, seen_before, act, state, code, complete = FAULTS[fault]
    expected = expected_tokens(stack, max_tokens)
    side_expected = "".join(expected_tokens(stack, SIDE_TOKENS))
    # The same fault for each of the three requests, in whatever order they arrive.
    httpx.post(
        f"{stack.engine}/_scripted/faults", json={"faults": [scripted] * 3}
    ).raise_for_status()
    http = log_in(stack)
    job_id = submit_job(api)
    batch_id = upload_batch(http)
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

    job, item = side_runs(stack, job_id, batch_id)
    harvested = api.get(f"/harvest/{job_id}").json()
    if fault in ("worker SIGKILL", "Redis restart", "Postgres restart"):
        assert harvested["status"] == "succeeded", harvested.get("error")
        assert harvested["result"]["choices"][0]["text"] == side_expected
        assert item["state"] == "done" and item["samples"][0]["text"] == side_expected
        assert (job["attempts"], item["attempts"]) == (
            (2, 1) if fault == "worker SIGKILL" else (1, 1)
        )
    else:
        assert harvested["status"] == "failed"
        assert harvested["error"]["error"]["code"] in ("upstream_error", "upstream_deadline")
        assert harvested["usage"]["completion_tokens"] == 0  # the prompt alone
        assert item["state"] == "failed" and item["error_code"]
    ledger = balance(stack)
    assert ledger["reserved"] == 0
    assert ledger["pages"] == ledger["pages charged"]
    assert ledger["api"] == ledger["key"] == ledger["jobs charged"]
