"""Thin Celery tasks of the public API."""

from celery import shared_task

from api import ledger


@shared_task(ignore_result=True)
def release_stale_api_reservations() -> int:
    return ledger.release_stale()
