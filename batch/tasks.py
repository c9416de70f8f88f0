"""Thin Celery tasks over batch.feeding."""

from celery import shared_task

from batch import feeding


@shared_task(ignore_result=True)
def feed_batches() -> int:
    return feeding.feed()


@shared_task(ignore_result=True)
def sweep_batches() -> dict[str, int]:
    return feeding.sweep()
