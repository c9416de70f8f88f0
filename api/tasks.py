"""Thin Celery tasks of the public API (its jobs run as the door's runs:
completions.tasks.run_generation)."""

from celery import shared_task

from completions import lifecycle


@shared_task(ignore_result=True)
def release_stale_api_reservations() -> int:
    # The door's release sweep; the API's lease check is registered by api.ledger.
    return lifecycle.release_lost_requests()
