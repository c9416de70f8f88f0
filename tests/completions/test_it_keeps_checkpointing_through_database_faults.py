"""The checkpoint thread survives a failed write: a dropped database connection is
retried on a fresh one (the heartbeat goes on, the run ends done); when writes keep
failing, the main loop stops the stream and keeps what arrived, marked interrupted."""

import threading
import time

import pytest
from django.db import connection, connections

from completions import pipeline
from completions.budget import usage_summary
from completions.models import Generation
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def start(user, max_tokens: int) -> tuple[Generation, threading.Thread]:
    generation = pipeline.start(
        user, {"model": "scripted", "prompt": [1, 2, 3], "max_tokens": max_tokens}, kind="loom"
    )

    def work() -> None:
        try:
            pipeline.execute(generation.pk)
        finally:
            connections.close_all()  # this thread's

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    return generation, worker


def drop_other_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_it_keeps_beating_after_its_connection_is_dropped(
    scripted, settings, make_user, unconsumed_queue
):
    settings.WEFT_CHECKPOINT_INTERVAL_SECONDS = 0.1
    scripted.faults({"token_delay": 0.04})
    user = make_user()
    generation, worker = start(user, 60)
    wait_until(
        lambda: Generation.objects.get(pk=generation.pk).usage is not None, 10, "a checkpoint"
    )
    assert drop_other_connections() >= 1  # the checkpoint thread's (and the worker's)
    dropped_at = Generation.objects.get(pk=generation.pk).updated_at
    wait_until(
        lambda: (
            (row := Generation.objects.get(pk=generation.pk)).updated_at > dropped_at
            and row.state == "running"
        ),
        5,
        "a heartbeat after the drop",
    )
    worker.join(30)
    generation.refresh_from_db()
    assert generation.state == "done"
    assert generation.usage["completion_tokens"] == 60
    assert usage_summary(user)["reserved"] == 0


def test_it_stops_and_keeps_the_text_when_checkpoints_keep_failing(
    scripted, settings, make_user, unconsumed_queue
):
    settings.WEFT_CHECKPOINT_INTERVAL_SECONDS = 0.1
    settings.WEFT_GENERATION_STALE_SECONDS = 1.0  # gives up after 0.5 s without a beat
    scripted.faults({"token_delay": 0.02})
    user = make_user()
    with connection.cursor() as cursor:
        # Every checkpoint write fails from now on; moving to a terminal state still works.
        cursor.execute(
            "CREATE FUNCTION weft_refuse_checkpoint() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'checkpoint refused'; END $$ LANGUAGE plpgsql;"
            "CREATE TRIGGER weft_refuse_checkpoint BEFORE UPDATE ON completions_generation "
            "FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state = 'running') "
            "EXECUTE FUNCTION weft_refuse_checkpoint();"
        )
    try:
        started = time.monotonic()
        generation, worker = start(user, 400)  # 8 s of tokens if nothing stopped it
        worker.join(30)
        elapsed = time.monotonic() - started
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "DROP TRIGGER weft_refuse_checkpoint ON completions_generation;"
                "DROP FUNCTION weft_refuse_checkpoint();"
            )
    generation.refresh_from_db()
    assert generation.state == "interrupted"
    assert generation.error_code == "checkpoint_failed"
    assert elapsed < 5, elapsed
    received = generation.usage["completion_tokens"]
    assert 0 < received < 400
    assert generation.choices[0]["text"]  # kept, not lost
    assert generation.choices[0]["finish_reason"] is None
    assert generation.charged_tokens == 3 + received
    assert usage_summary(user)["reserved"] == 0
