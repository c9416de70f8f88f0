"""SIGKILL the worker mid-stream: the checkpoint keeps the partial result (losing at
most about a second of tokens) and it is marked interrupted — not lost, not done."""

import asyncio
import threading
import time

import httpx
import pytest

from completions import pipeline
from completions.budget import usage_summary
from tests.completions.wsclient import Watcher, watch
from tests.support import Supervisor, start_worker, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN_DELAY = 0.05  # 20 tokens a second


def test_it_keeps_the_partial_result_marked_interrupted(
    door_stack, door_env, settings, make_user, session_cookie, client, tmp_path
):
    user = make_user()
    cookie = session_cookie(user)
    engine = door_stack["engine"]
    settings.WEFT_BACKEND_URL = f"{engine}/v1"
    settings.WEFT_GENERATION_QUEUE = "killme"
    sup = Supervisor()
    try:
        worker_env = {**door_env, "WEFT_GENERATION_QUEUE": "killme"}
        worker = start_worker(sup, worker_env, tmp_path / "worker.log", concurrency=1)
        httpx.post(
            f"{engine}/_scripted/faults",
            json={"faults": [{"first_byte_delay": 0.5, "token_delay": TOKEN_DELAY}]},
        )
        generation = pipeline.start(
            user, {"model": "scripted", "prompt": [1, 2, 3], "max_tokens": 400}, kind="loom"
        )
        watcher = Watcher()
        stop = threading.Event()
        listener = threading.Thread(
            target=lambda: asyncio.run(
                watch(
                    door_stack["url"],
                    cookie,
                    generation.pk,
                    watcher,
                    until_final=False,
                    timeout=60,
                    stop=stop,
                )
            ),
            daemon=True,
        )
        listener.start()
        wait_until(lambda: watcher.count() >= 40, 30, "40 streamed tokens")
        worker.kill()  # SIGKILL: no cleanup of any kind runs in the worker
        worker.wait()
        killed_at = watcher.count()
    finally:
        sup.stop_all()

    generation.refresh_from_db()
    assert generation.state == "running"  # nobody knows yet
    checkpoint = generation.choices[0]["text"]
    saved_tokens = generation.usage["completion_tokens"]
    # At most ~1 s of tokens (20) missing from the checkpoint, with slack for scheduling.
    assert killed_at - saved_tokens <= 1.0 / TOKEN_DELAY + 5, (killed_at, saved_tokens)
    assert saved_tokens > 0
    streamed = watcher.text(0)
    assert streamed.startswith(checkpoint) or checkpoint.startswith(streamed)

    # A page asking about it after the heartbeat went stale sees it interrupted.
    settings.WEFT_GENERATION_STALE_SECONDS = 1.0
    time.sleep(1.5)
    client.force_login(user)
    response = client.get(f"/generations/{generation.pk}/result/")
    assert response.status_code == 200
    generation.refresh_from_db()
    assert generation.state == "interrupted"
    assert generation.error_code == "worker_lost"
    assert generation.choices[0]["text"] == checkpoint  # kept, not lost
    assert generation.choices[0]["finish_reason"] is None  # not shown as complete
    assert generation.charged_tokens == 3 + saved_tokens
    assert usage_summary(user)["reserved"] == 0
    assert "Interrupted" in response.content.decode()
    # The page's socket hears it too.
    wait_until(
        lambda: any("state-interrupted" in m for m in watcher.messages),
        10,
        "interrupted state on the socket",
    )
    stop.set()
    listener.join(timeout=5)
