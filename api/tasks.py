"""Thin Celery tasks of the public API."""

from celery import shared_task

from api import jobs, ledger


@shared_task(ignore_result=True)
def release_stale_api_reservations() -> int:
    return ledger.release_stale()


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_completion_job(job_id: int) -> None:
    # Safe to run twice: jobs.execute claims the queued row under a lock first.
    jobs.execute(job_id)


@shared_task(ignore_result=True)
def recover_completion_jobs() -> dict[str, int]:
    return jobs.recover()


@shared_task(ignore_result=True)
def expire_completion_jobs() -> dict[str, int]:
    return jobs.expire()
