"""Workers take queued runs by owner, not by arrival: the owner with the fewest runs
running goes first, then the one served longest ago; inside an owner, its keys take
turns the same way; a run cancelled while queued is finished instead of claimed, and a
queue's claims never reach another queue's runs (real Postgres, SKIP LOCKED)."""

import pytest

from api.models import ApiKey
from completions import scheduler
from completions.models import Generation

pytestmark = pytest.mark.django_db

QUEUE = "turns-test.bulk"


def queued(owner, n: int, key=None, queue: str = QUEUE) -> list[Generation]:
    return [
        Generation.objects.create(
            owner=owner,
            key=key,
            kind="job" if key else "workbench",
            lane="jobs",
            queue=queue,
            params={},
            state="queued",
        )  # fmt: skip
        for _ in range(n)
    ]


def test_it_gives_a_quiet_owner_the_next_turn(make_user):
    flood, quiet = make_user(), make_user()
    queued(flood, 6)
    queued(quiet, 1)
    order = [scheduler.claim_next(QUEUE, f"w{i}").owner_id for i in range(4)]
    # The flooder's first run started first (it arrived first); the quiet owner's one
    # run is next, ahead of the flooder's five others.
    assert order == [flood.pk, quiet.pk, flood.pk, flood.pk]


def test_it_alternates_between_owners_as_runs_finish(make_user):
    a, b = make_user(), make_user()
    queued(a, 3)
    queued(b, 3)
    owners = []
    for i in range(6):
        run = scheduler.claim_next(QUEUE, f"w{i}")
        owners.append(run.owner_id)
        Generation.objects.filter(pk=run.pk).update(state="done")  # one worker thread
    assert owners == [a.pk, b.pk, a.pk, b.pk, a.pk, b.pk]


def test_it_takes_turns_between_one_owners_keys(make_user):
    owner = make_user()
    first, _ = ApiKey.objects.create_key(owner, "first")
    second, _ = ApiKey.objects.create_key(owner, "second")
    queued(owner, 3, key=first)
    queued(owner, 1, key=second)
    keys = [scheduler.claim_next(QUEUE, f"w{i}").key_id for i in range(3)]
    assert keys == [first.pk, second.pk, first.pk]


def test_it_finishes_a_cancelled_run_instead_of_claiming_it(make_user):
    owner = make_user()
    gone, kept = queued(owner, 2)
    Generation.objects.filter(pk=gone.pk).update(cancel_requested=True)
    claimed = scheduler.claim_next(QUEUE, "w1")
    assert claimed.pk == kept.pk and (claimed.state, claimed.attempts) == ("running", 1)
    gone.refresh_from_db()
    assert gone.state == "cancelled"
    assert scheduler.claim_next(QUEUE, "w2") is None


def test_it_never_claims_another_queues_run(make_user):
    owner = make_user()
    queued(owner, 1, queue="elsewhere.bulk")
    assert scheduler.claim_next(QUEUE, "w1") is None
    assert Generation.objects.get().state == "queued"


def test_it_takes_runs_in_arrival_order_when_told_to(make_user, settings):
    settings.WEFT_SCHEDULER = "arrival"
    flood, quiet = make_user(), make_user()
    queued(flood, 3)
    queued(quiet, 1)
    order = [scheduler.claim_next(QUEUE, f"w{i}").owner_id for i in range(4)]
    assert order == [flood.pk] * 3 + [quiet.pk]
