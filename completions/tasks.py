"""Thin Celery tasks: take an id, call domain code."""

from celery import shared_task

from completions import lifecycle, pipeline
from completions.models import Generation


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_generation(generation_id: int) -> None:
    # Safe to run twice: pipeline.execute claims the row under a lock first.
    pipeline.execute(generation_id)


@shared_task(ignore_result=True)
def mark_interrupted_generations() -> int:
    return lifecycle.mark_stale_interrupted()


@shared_task(ignore_result=True)
def requeue_or_fail_never_started_generations() -> dict[str, int]:
    return lifecycle.requeue_or_fail_never_started()


@shared_task(ignore_result=True)
def purge_expired_generations() -> int:
    return Generation.objects.purge_expired()
