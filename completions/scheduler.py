"""Which run a worker takes next: owners take turns, not arrival order.

Every queued run sends one Celery message to its lane's queue (config.lanes); the
message is a turn, not an assignment. A worker that takes a message claims the fairest
queued run of that queue under `FOR UPDATE SKIP LOCKED` — the owner (a user) with the
fewest runs running there, then the one served least recently, then inside that owner
the key (an API job's; page runs and Batch prompts have none) by the same two rules,
then the oldest run. So a user who queued 200 jobs gets one turn in each round, like a
user who queued one; their runs still all run, since there are as many messages as
queued runs (a message that finds nothing left to claim does nothing, so a redelivered
or re-sent message is harmless). Capacity per lane comes from the worker pools: the
interactive pool's threads never take bulk work.

Idle owners first, promptly: on the bulk pool WEFT_BULK_RESERVED_SLOTS of its
WEFT_BULK_SLOTS threads are kept for owners with nothing running there. An owner who
already runs something is claimed a run only while fewer than the rest are running, so
a flood holds every other thread (the engine's batched decode is what bounds its
throughput, not the last thread) and a newcomer's run starts at once instead of after a
flood job ends. A turn that finds only such owners' runs at that bound claims nothing;
the turn is given back when a bulk run ends (one turn per end, on the run's queue), so
the flood never waits for the resend sweep. Claims on a queue with a reservation take
a transaction-scoped advisory lock so the running count they read stays true.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from completions.models import Generation
from completions.signals import generation_finished
from config import lanes

log = logging.getLogger(__name__)
State = Generation.State
Lane = Generation.Lane


@dataclass(frozen=True)
class Policy:
    """What a lane does with a run whose worker died or whose message may be lost."""

    max_attempts: int  # runs in all when its worker dies mid-run (then it ends)
    resend_after: float  # seconds queued before its message is sent again
    give_up_after_resend: bool  # a page run still queued a limit after that fails


def policy(lane: str) -> Policy:
    if lane == Lane.JOBS:
        return Policy(settings.WEFT_JOB_MAX_ATTEMPTS, settings.WEFT_JOB_REQUEUE_SECONDS, False)
    if lane == Lane.BATCH:
        # A prompt whose worker died is sent once more; a long wait behind other owners'
        # bulk work is no reason to fail it.
        return Policy(2, settings.WEFT_JOB_REQUEUE_SECONDS, False)
    # A page run streams to a page: run again, its text would change under the reader;
    # it is kept as it was, interrupted.
    return Policy(1, settings.WEFT_GENERATION_QUEUED_LIMIT_SECONDS, True)


def lane_for(kind: str, workload: str) -> str:
    if kind == Generation.Kind.JOB:
        return Lane.JOBS
    return Lane.BATCH if workload == "batch" else Lane.INTERACTIVE


def queue_for(lane: str) -> str:
    return lanes.queue_of_lane(lane, settings.WEFT_GENERATION_QUEUE)


# The fairest queued run of one queue. `waiting` is every (owner, key) with runs queued
# there; for each, how many of the owner's (and the key's) runs are running there and
# when the owner (and the key) last started one (index generation_owner_turn). Only the
# chosen row is locked, skipping rows another worker is claiming.
NEXT = """
WITH waiting AS (
    SELECT DISTINCT owner_id, key_id FROM completions_generation
    WHERE queue = %(queue)s AND state = 'queued'
), turns AS (
    SELECT w.owner_id, w.key_id,
        (SELECT count(*) FROM completions_generation r WHERE r.queue = %(queue)s
            AND r.state = 'running' AND r.owner_id = w.owner_id) AS owner_running,
        (SELECT max(r.started_at) FROM completions_generation r WHERE r.queue = %(queue)s
            AND r.owner_id = w.owner_id) AS owner_served,
        (SELECT count(*) FROM completions_generation r WHERE r.queue = %(queue)s
            AND r.state = 'running' AND r.owner_id = w.owner_id
            AND r.key_id IS NOT DISTINCT FROM w.key_id) AS key_running,
        (SELECT max(r.started_at) FROM completions_generation r WHERE r.queue = %(queue)s
            AND r.owner_id = w.owner_id AND r.key_id IS NOT DISTINCT FROM w.key_id) AS key_served
    FROM waiting w
)
SELECT g.id FROM completions_generation g
JOIN turns t ON t.owner_id = g.owner_id AND t.key_id IS NOT DISTINCT FROM g.key_id
WHERE g.queue = %(queue)s AND g.state = 'queued'
    AND (t.owner_running = 0 OR (SELECT count(*) FROM completions_generation r
        WHERE r.queue = %(queue)s AND r.state = 'running') < %(shared)s)
ORDER BY t.owner_running, t.owner_served NULLS FIRST, t.key_running,
    t.key_served NULLS FIRST, g.created_at, g.id
LIMIT 1
FOR UPDATE OF g SKIP LOCKED
"""


# WEFT_SCHEDULER=arrival: runs in the order they were queued, as a plain FIFO queue
# (what Weft did before owners took turns) — for comparison, or a single-tenant install.
ARRIVAL = """
SELECT id FROM completions_generation WHERE queue = %(queue)s AND state = 'queued'
ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
"""


def shared_slots(queue: str) -> int | None:
    """How many runs may run at once on `queue` for owners already running one there
    (the bulk pool's threads but the reserved); None: no reservation on this queue."""
    if not queue.endswith(f".{lanes.BULK_POOL}") or settings.WEFT_BULK_RESERVED_SLOTS <= 0:
        return None
    return max(1, settings.WEFT_BULK_SLOTS - settings.WEFT_BULK_RESERVED_SLOTS)


def claim_next(queue: str, run_token: str) -> Generation | None:
    """Claim the fairest queued run of `queue` for this worker (a fresh run_token, the
    attempt counted), or None when nothing is left to claim. A run cancelled while
    queued, or an API job whose key was revoked meanwhile, is finished here instead."""
    from completions import lifecycle  # lifecycle imports this module

    while True:
        with transaction.atomic():
            with connection.cursor() as cursor:
                fair = settings.WEFT_SCHEDULER != "arrival"
                shared = shared_slots(queue) if fair else None
                if shared is not None:
                    cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [queue])
                args: dict[str, str | int] = {
                    "queue": queue,
                    "shared": shared if shared is not None else 2**31 - 1,
                }
                cursor.execute(NEXT if fair else ARRIVAL, args)
                found = cursor.fetchone()
            if found is None:
                return None
            row = Generation.objects.select_related("key").get(pk=found[0])
            if row.cancel_requested or (row.key is not None and row.key.revoked_at is not None):
                lifecycle.finish(row, State.CANCELLED, run_token=None)
                continue
            now = timezone.now()
            row.state = State.RUNNING
            row.run_token = run_token
            row.attempts += 1
            row.started_at = now
            row.updated_at = now
            row.save(update_fields=["state", "run_token", "attempts", "started_at", "updated_at"])
            return row


# --- admission of bulk work fed a little at a time (Batch) ----------------------------------

# Owners in the order the bulk lanes serve them, for a feeder choosing whose work to
# queue next: the fewest runs queued or running on the queue first, then the one whose
# latest run there was made longest ago — the claim's rule (owners take turns), read
# before the runs exist.
OWNER_TURNS = """
SELECT o.owner_id FROM unnest(%(owners)s::bigint[]) AS o(owner_id)
ORDER BY
    (SELECT count(*) FROM completions_generation g WHERE g.queue = %(queue)s
        AND g.owner_id = o.owner_id AND g.state IN ('queued', 'running')),
    (SELECT max(g.created_at) FROM completions_generation g WHERE g.queue = %(queue)s
        AND g.owner_id = o.owner_id) NULLS FIRST,
    o.owner_id
"""


def owners_in_turn(lane: str, owners: list[int]) -> list[int]:
    """`owners` (who have work to feed into `lane`) in the order their turns come."""
    if len(owners) < 2:
        return list(owners)
    with connection.cursor() as cursor:
        cursor.execute(OWNER_TURNS, {"owners": owners, "queue": queue_for(lane)})
        return [row[0] for row in cursor.fetchall()]


def admission_lock(name: str) -> None:
    """One feeder of `name` at a time, until the caller's transaction ends (a bound on
    what is in flight is then exact)."""
    if not connection.in_atomic_block:
        raise RuntimeError("admission_lock() must run inside transaction.atomic()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"weft:admit:{name}"])


def give_back_turn(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """A bulk run ended (after its commit): one turn on its queue, for a run that a
    turn declined while the shared slots were full (a turn to spare does nothing)."""
    from completions import lifecycle  # lifecycle imports this module

    if generation.queue and shared_slots(generation.queue) is not None:
        queued = Generation.objects.filter(queue=generation.queue, state=State.QUEUED)
        waiting = queued.order_by("created_at").only("pk", "queue").first()
        if waiting is not None:
            lifecycle.enqueue(waiting)


generation_finished.connect(give_back_turn, dispatch_uid="completions.scheduler.give_back_turn")
