"""Real ASGI server + real Celery worker + real Redis + the engine (scripted backend
over HTTP): a generation's tokens reach a WebSocket client in order, per choice, and
the checkpoint holds the full result."""

import asyncio

import httpx
import pytest

from completions import pipeline
from tests.completions.wsclient import Watcher, watch

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_streams_in_order_and_checkpoints_the_full_result(
    door_stack, door_queue, settings, make_user, session_cookie
):
    user = make_user()
    cookie = session_cookie(user)
    engine = door_stack["engine"]
    # The first byte waits a moment, so the socket is surely listening before tokens flow.
    httpx.post(
        f"{engine}/_scripted/faults",
        json={"faults": [{"first_byte_delay": 1.0, "token_delay": 0.01}]},
    )
    settings.WEFT_BACKEND_URL = f"{engine}/v1"
    generation = pipeline.start(
        user, {"model": "scripted", "prompt": "The story begins", "max_tokens": 40, "n": 2, "logprobs": 2},
        kind="workbench",
    )  # fmt: skip
    watcher = Watcher()
    asyncio.run(watch(door_stack["url"], cookie, generation.pk, watcher, timeout=60))
    generation.refresh_from_db()
    assert generation.state == "done", (generation.state, generation.error_code)
    for index, choice in enumerate(generation.choices):
        streamed = watcher.tokens[index]
        assert len(streamed) == 40
        # In order: the streamed pieces, concatenated, are exactly the saved text, and
        # they match the saved per-token list one by one.
        assert "".join(streamed) == choice["text"]
        assert streamed == choice["logprobs"]["tokens"]
        assert choice["completion_tokens"] == 40  # per sample, for pages without logprobs
    assert generation.usage["completion_tokens"] == 80
    assert generation.charged_tokens == generation.usage["total_tokens"]
    assert "state-done" in watcher.messages[-1]
