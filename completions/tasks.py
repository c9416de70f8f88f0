"""Thin Celery tasks: take an id, call domain code."""

from celery import shared_task

from completions import lifecycle, pipeline


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_generation(generation_id: int, queue: str | None = None) -> None:
    # One turn on `queue`: claims the fairest queued run there (completions.scheduler),
    # so a second delivery claims another run, or nothing.
    pipeline.execute(generation_id, queue)


@shared_task(ignore_result=True)
def recover_stale_runs() -> dict[str, int]:
    return lifecycle.recover_stale()


@shared_task(ignore_result=True)
def resend_lost_runs() -> dict[str, int]:
    return lifecycle.resend_lost()


@shared_task(ignore_result=True)
def expire_runs() -> dict[str, int]:
    return lifecycle.expire()
