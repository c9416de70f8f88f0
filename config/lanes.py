"""Worker lanes: which Celery queue a run is sent to, and which workers take it.

Every run (a page's generation, a Batch prompt, an API job) has a lane. Lanes are
served by worker pools, each pool its own Celery worker process on its own queue, so
that the capacity of one pool cannot be taken by the work of another:

- the `interactive` pool runs the pages' runs (Workbench, Loom, Inspect) and the
  short maintenance tasks of beat: a page run never waits behind bulk work;
- the `bulk` pool runs API jobs and Batch prompts (and the Loom's expansions); inside
  it owners take turns (completions.scheduler), not arrival order.

A queue's name is `<prefix>.<pool>`, the prefix being WEFT_GENERATION_QUEUE (default
"weft"): two Weft installations sharing one Redis, or two test stacks, keep apart by
their prefixes. Django-free: the launcher imports it before Django is set up.
"""

from __future__ import annotations

from dataclasses import dataclass

INTERACTIVE = "interactive"
JOBS = "jobs"
BATCH = "batch"
LANES = (INTERACTIVE, JOBS, BATCH)

INTERACTIVE_POOL = "interactive"
BULK_POOL = "bulk"
POOL_OF_LANE = {INTERACTIVE: INTERACTIVE_POOL, JOBS: BULK_POOL, BATCH: BULK_POOL}
POOLS = (INTERACTIVE_POOL, BULK_POOL)
# beat's sweeps are short: they run beside the page runs, never behind a flood of bulk work
MAINTENANCE_POOL = INTERACTIVE_POOL

DEFAULT_PREFIX = "weft"


def queue_name(pool: str, prefix: str) -> str:
    """The Celery queue of a pool; `prefix` is WEFT_GENERATION_QUEUE (read from
    settings at send time: tests point runs at their own stack's workers)."""
    return f"{prefix or DEFAULT_PREFIX}.{pool}"


def queue_of_lane(lane: str, prefix: str) -> str:
    return queue_name(POOL_OF_LANE[lane], prefix)


@dataclass(frozen=True)
class WorkerPool:
    name: str
    queues: tuple[str, ...]
    concurrency: int


def worker_pools(
    prefix: str, interactive_threads: int, bulk_threads: int
) -> tuple[WorkerPool, WorkerPool]:
    """The workers a deployment runs: one process per pool (make run, the topology
    test and deploy/'s units all start these two)."""
    return (
        WorkerPool(INTERACTIVE_POOL, (queue_name(INTERACTIVE_POOL, prefix),), interactive_threads),
        WorkerPool(BULK_POOL, (queue_name(BULK_POOL, prefix),), bulk_threads),
    )
