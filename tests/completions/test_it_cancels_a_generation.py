import threading
import time

import pytest
from django.db import connection

from completions import lifecycle, pipeline
from completions.budget import usage_summary

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_closes_the_stream_and_keeps_the_partial_text(scripted, make_user, unconsumed_queue):
    user = make_user()
    scripted.faults({"token_delay": 0.05})
    generation = pipeline.start(
        user, {"model": "scripted", "prompt": [1, 2], "max_tokens": 400}, kind="workbench"
    )

    def run():
        try:
            pipeline.execute(generation.pk)
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        generation.refresh_from_db()
        if generation.choices[0]["text"]:
            break
        time.sleep(0.05)
    lifecycle.cancel(generation)
    worker.join(timeout=20)
    generation.refresh_from_db()
    assert generation.state == "cancelled"
    text = generation.choices[0]["text"]
    assert text and generation.choices[0]["finish_reason"] is None
    tokens = generation.charged_tokens - 2
    assert 0 < tokens < 400
    assert usage_summary(user)["reserved"] == 0


def test_it_cancels_a_queued_run_directly(scripted, make_user, unconsumed_queue):
    user = make_user()
    generation = pipeline.start(
        user, {"model": "scripted", "prompt": "Hi", "max_tokens": 4}, kind="workbench"
    )
    lifecycle.cancel(generation)
    assert generation.state == "cancelled" and generation.charged_tokens == 0
    pipeline.execute(generation.pk)  # the queued task arriving later
    assert scripted.requests() == []
