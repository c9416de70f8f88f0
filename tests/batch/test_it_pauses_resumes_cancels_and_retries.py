"""Pause stops feeding (what is in flight finishes), resume feeds again, cancel stops
the prompts not sent and, through the door, the ones still queued (one already at the
backend finishes and is kept); failed rows are sent again by Retry. Against a real
worker and the scripted engine."""

import time

import pytest

from batch.models import Batch, BatchItem
from completions.models import BudgetMonth, Generation
from tests.batch.conftest import upload

HX = {"HTTP_HX_REQUEST": "true"}


def _until(predicate, timeout: float = 60, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out: {what}")


def _states(batch) -> dict[str, int]:
    out: dict[str, int] = {}
    for state in batch.items.values_list("state", flat=True):
        out[state] = out.get(state, 0) + 1
    return out


@pytest.mark.django_db(transaction=True)
def test_it_pauses_resumes_and_cancels(batch_stack, engine, client, make_user):
    user = make_user()
    client.force_login(user)
    engine.fault(*[{"token_delay": 0.08}] * 30)  # ~0.5 s a prompt
    assert (
        upload(client, "\n".join(f"p{i}" for i in range(10)), "ten.txt", max_tokens="6").status_code
        == 302
    )
    batch = Batch.objects.get(owner=user)
    _until(lambda: batch.items.filter(state="done").exists(), what="a first row done")

    response = client.post(f"/batch/{batch.pk}/pause/", **HX)
    assert response.status_code == 200 and 'id="batch-results"' in response.content.decode()
    batch.refresh_from_db()
    assert batch.state == "paused"
    _until(lambda: not batch.items.filter(state="active").exists(), what="in-flight rows finish")
    paused = _states(batch)
    time.sleep(1.5)
    assert _states(batch) == paused and paused.get("pending", 0) > 0  # nothing new was sent

    client.post(f"/batch/{batch.pk}/resume/", **HX)
    _until(lambda: batch.items.filter(state="active").exists(), what="feeding again")
    response = client.post(f"/batch/{batch.pk}/cancel/", **HX)
    assert response.status_code == 200
    batch.refresh_from_db()
    assert batch.state == "cancelled"
    _until(lambda: not batch.items.filter(state="active").exists(), what="in-flight rows cancelled")
    states = _states(batch)
    assert set(states) <= {"done", "cancelled"} and states.get("cancelled", 0) >= 1, states
    for item in batch.items.filter(state="cancelled", generation__isnull=False):
        assert item.generation.state == "cancelled"  # stopped through the door, unsent
    assert not Generation.objects.filter(owner=user, state__in=Generation.ACTIVE).exists()
    assert BudgetMonth.objects.get(user=user).reserved == 0
    # A cancelled batch is not fed again, and its buttons say so.
    assert client.post(f"/batch/{batch.pk}/resume/", **HX).status_code == 200
    batch.refresh_from_db()
    assert batch.state == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_it_retries_failed_rows(batch_stack, engine, client, make_user):
    user = make_user()
    client.force_login(user)
    # The first two requests fail (500 is not retried by the door): two rows fail.
    engine.fault({"status": 500, "message": "boom"}, {"status": 500, "message": "boom"})
    assert upload(client, "a\nb\nc\nd\n", "four.txt", max_tokens="4").status_code == 302
    batch = Batch.objects.get(owner=user)
    _until(lambda: Batch.objects.get(pk=batch.pk).state == "done", what="the batch ends")
    assert _states(batch) == {"done": 2, "failed": 2}
    failed = list(batch.items.filter(state="failed"))
    assert {i.error_code for i in failed} == {"internal_error"}  # the backend's code

    # One row from its own Retry button, the other with "Retry failed".
    response = client.post(f"/batch/{batch.pk}/{failed[0].pk}/retry/", **HX)
    assert response.status_code == 200
    _until(lambda: BatchItem.objects.get(pk=failed[0].pk).state == "done", what="row retried")
    response = client.post(f"/batch/{batch.pk}/retry/", **HX)
    assert "1 failed prompt sent again." in response.content.decode()
    _until(lambda: Batch.objects.get(pk=batch.pk).state == "done", what="the batch ends again")
    assert _states(batch) == {"done": 4}
    for item in failed:
        item.refresh_from_db()
        assert item.attempts == 2 and item.samples and item.error_code == ""
    # A done row is not sent again.
    done = batch.items.first()
    response = client.post(f"/batch/{batch.pk}/{done.pk}/retry/", **HX)
    assert "only failed prompts are retried" in response.content.decode()
