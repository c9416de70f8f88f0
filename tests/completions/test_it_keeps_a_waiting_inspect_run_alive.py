"""An Inspect (run_now) row waits while the engine is busy with other runs: it beats like
a worker's, so the stale sweep leaves it alone and its real answer is kept."""

import threading

import pytest
from django.db import connections

from completions import lifecycle, pipeline
from completions.budget import usage_summary

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_is_not_swept_as_stale_while_it_waits(scripted, settings, make_user):
    settings.WEFT_CHECKPOINT_INTERVAL_SECONDS = 0.1
    settings.WEFT_GENERATION_STALE_SECONDS = 1.0
    scripted.faults({"first_byte_delay": 3.0})  # the engine is busy for 3 stale periods
    user = make_user()
    stop = threading.Event()
    swept = []

    def beat() -> None:  # what Celery beat does, as often as the test can
        while not stop.wait(0.2):
            swept.append(lifecycle.recover_stale())
        connections.close_all()

    sweeper = threading.Thread(target=beat, daemon=True)
    sweeper.start()
    try:
        generation = pipeline.run_now(
            user,
            {"model": "scripted", "prompt": "Hi there", "max_tokens": 1, "echo": True,
             "prompt_logprobs": 0},
        )  # fmt: skip
    finally:
        stop.set()
        sweeper.join(5)
    assert len(swept) >= 10 and all(not any(s.values()) for s in swept)
    assert generation.state == "done", generation.error_code
    assert generation.choices[0]["prompt_logprobs"]
    assert generation.charged_tokens == 10
    assert usage_summary(user)["reserved"] == 0
