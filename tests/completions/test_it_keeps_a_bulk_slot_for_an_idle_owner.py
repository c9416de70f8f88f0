"""On the bulk pool, WEFT_BULK_RESERVED_SLOTS threads are kept for owners with nothing
running: a flooding owner is claimed runs only while fewer than the other threads are
running, so an owner with nothing running starts at once; a turn that found only the
flooder's runs claims nothing, and is given back (a message on the queue) when a bulk
run ends — the flood goes on without waiting for the resend sweep (real Postgres and
Redis, the scheduler's own claims)."""

import pytest
import redis
from django.conf import settings as django_settings

from completions import lifecycle, scheduler
from completions.models import Generation

pytestmark = pytest.mark.django_db

QUEUE = "idle-first-test.bulk"


def queued(owner, n: int) -> list[Generation]:
    return [
        Generation.objects.create(
            owner=owner, kind="workbench", lane="batch", queue=QUEUE, params={}, state="queued"
        )  # fmt: skip
        for _ in range(n)
    ]


def turns_sent() -> int:
    return redis.Redis.from_url(django_settings.REDIS_URL).llen(QUEUE)


def test_it_starts_an_idle_owners_run_while_a_flood_waits(
    make_user, settings, django_capture_on_commit_callbacks
):
    settings.WEFT_BULK_SLOTS = 3
    settings.WEFT_BULK_RESERVED_SLOTS = 1
    redis.Redis.from_url(django_settings.REDIS_URL).delete(QUEUE)
    flood, quiet = make_user(), make_user()
    queued(flood, 5)
    running = [scheduler.claim_next(QUEUE, f"w{i}") for i in range(2)]
    assert [r.owner_id for r in running] == [flood.pk, flood.pk]
    # A third thread is free, but it is the one kept for owners with nothing running.
    assert scheduler.claim_next(QUEUE, "w2") is None

    queued(quiet, 1)
    claimed = scheduler.claim_next(QUEUE, "w3")
    assert claimed is not None and claimed.owner_id == quiet.pk

    # A flood run ends: a turn goes back to the queue. The free thread is kept again
    # (the quiet owner's run is running), so the flood waits for it to end.
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.finish(running[0], "done", run_token="w0")
    assert turns_sent() == 1
    assert scheduler.claim_next(QUEUE, "w4") is None
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.finish(claimed, "done", run_token="w3")
    assert turns_sent() == 2
    assert scheduler.claim_next(QUEUE, "w5").owner_id == flood.pk
    redis.Redis.from_url(django_settings.REDIS_URL).delete(QUEUE)


def test_it_gives_every_thread_but_the_reserved_to_a_lone_flood(make_user, settings):
    settings.WEFT_BULK_SLOTS = 4
    settings.WEFT_BULK_RESERVED_SLOTS = 1
    flood = make_user()
    queued(flood, 6)
    claimed = [scheduler.claim_next(QUEUE, f"w{i}") for i in range(4)]
    assert [c is not None for c in claimed] == [True, True, True, False]
    settings.WEFT_BULK_RESERVED_SLOTS = 0  # no reservation: work-conserving to the last
    assert scheduler.claim_next(QUEUE, "w9") is not None
