"""Thin Celery tasks of the public API (its jobs run as the door's runs:
completions.tasks.run_generation)."""

from celery import shared_task

from api import ledger


@shared_task(ignore_result=True)
def release_stale_api_reservations() -> int:
    return ledger.release_stale()
