"""A batch runs on the pages' own pipeline: every prompt is one of the door's
Generations (workload "batch", so the backend gets X-Acs-Workload: batch), run by a
real Celery worker, never more at once than WEFT_BATCH_CONCURRENCY; its samples are
copied into the batch, the reservations settle, and the WebSocket reports 100 %."""

import asyncio
import json
import time

import pytest
import websockets

from batch.models import Batch, BatchItem
from completions.models import BudgetMonth, Generation
from tests.batch.conftest import upload


async def _last_progress(base: str, cookie: str, batch_id: int, timeout: float) -> list[str]:
    url = base.replace("http://", "ws://") + f"/ws/batches/{batch_id}/"
    headers = {"Cookie": f"sessionid={cookie}", "Origin": base}
    messages: list[str] = []
    async with websockets.connect(url, additional_headers=headers) as ws:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = await asyncio.wait_for(ws.recv(), timeout)
            messages.append(message)
            if 'data-state="done"' in message:
                break
    return messages


@pytest.mark.django_db(transaction=True)
def test_it_runs_a_batch_as_generations_on_the_workers(
    batch_stack, engine, client, make_user, session_cookie
):
    user = make_user()
    client.force_login(user)
    cookie = session_cookie(user)
    # Slow the engine a little so that several generations overlap.
    engine.fault(*[{"token_delay": 0.03}] * 12)
    lines = "\n".join(json.dumps({"prompt": f"Story {i}:", "id": i}) for i in range(12))
    response = upload(client, lines, "twelve.jsonl", n="2", max_tokens="6")
    assert response.status_code == 302, response.content.decode()[-1500:]
    batch = Batch.objects.get(owner=user)

    loop = asyncio.new_event_loop()
    watch = loop.create_task(_last_progress(batch_stack["url"], cookie, batch.pk, 90))
    most = 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        loop.run_until_complete(asyncio.sleep(0.05))
        in_flight = Generation.objects.filter(workload="batch", owner=user,
                                              state__in=Generation.ACTIVE).count()  # fmt: skip
        most = max(most, in_flight)
        batch.refresh_from_db()
        if batch.state == Batch.State.DONE:
            break
    messages = loop.run_until_complete(asyncio.wait_for(watch, 30))
    loop.close()
    assert batch.state == Batch.State.DONE
    assert 1 <= most <= 2, most  # WEFT_BATCH_CONCURRENCY=2 in the stack

    items = list(batch.items.order_by("index"))
    assert [i.state for i in items] == [BatchItem.State.DONE] * 12
    for item in items:
        assert item.metadata == {"id": item.index}
        assert len(item.samples) == 2
        for sample in item.samples:
            assert sample["text"] and sample["finish_reason"] == "length"
            assert sample["tokens"] == 6 and sample["mean_logprob"] < 0
        generation = item.generation
        assert generation.workload == "batch" and generation.kind == "workbench"
        assert generation.claimed_at is not None  # never in the Workbench's Recover
        assert generation.params["prompt"] == item.prompt
        assert [c["text"] for c in generation.choices] == [s["text"] for s in item.samples]
    sent = engine.completions()
    assert len(sent) == 12
    assert {r["headers"]["x-acs-workload"] for r in sent} == {"batch"}
    assert BudgetMonth.objects.get(user=user).reserved == 0
    assert batch.progress()["tokens"] == 12 * 2 * 6

    last = messages[-1]
    assert 'data-state="done"' in last and "100.0 %" in last and "12 done" in last
    assert "0 remaining" in last and "tokens/s" in last

    # Any row opens in the Workbench (the run, its settings and samples) and as a Loom
    # tree whose children carry the samples' tokens.
    item = items[3]
    response = client.get(f"/batch/{batch.pk}/{item.pk}/workbench/")
    assert response["Location"] == f"/workbench/?generation={item.generation_id}"
    page = client.get(response["Location"]).content.decode()
    assert "Story 3:" in page and f"run {item.generation_id}" in page
    response = client.post(f"/batch/{batch.pk}/{item.pk}/loom/")
    from loom.models import Tree

    tree = Tree.objects.get(owner=user)
    assert response["Location"] == f"/loom/{tree.pk}/"
    kids = list(tree.root.kids.order_by("position"))
    assert [k.text for k in kids] == [s["text"] for s in item.samples]
    assert all(len(k.logprobs["tokens"]) == 6 for k in kids)
