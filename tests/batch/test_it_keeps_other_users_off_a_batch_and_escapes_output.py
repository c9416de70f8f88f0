"""A batch's socket, pages, fragments, export and row actions answer its owner
only; model output and prompts are shown as text, never as markup."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
import websockets

from batch.models import Batch, BatchItem
from loom.models import Tree

HOSTILE = '<img src=x onerror="alert(1)">'


def _world(user) -> tuple[Batch, BatchItem]:
    batch = Batch.objects.create(owner=user, title=f"t {HOSTILE}", params={"model": "scripted",
                                 "max_tokens": 4}, total=1, state="done")  # fmt: skip
    item = BatchItem.objects.create(
        batch=batch, index=0, line=1, prompt=f"p {HOSTILE}", state="done",
        metadata={"note": HOSTILE},
        samples=[{"text": f" {HOSTILE}", "finish_reason": "length", "tokens": 4,
                  "mean_logprob": -1.0}],
    )  # fmt: skip
    return batch, item


def _connect(base_url: str, batch_id: int, cookie: str) -> str:
    url = base_url.replace("http://", "ws://") + f"/ws/batches/{batch_id}/"

    async def connect():
        headers = {"Cookie": f"sessionid={cookie}", "Origin": base_url}
        async with websockets.connect(url, additional_headers=headers) as ws:
            return await asyncio.wait_for(ws.recv(), 10)

    with ThreadPoolExecutor(1) as pool:  # a browser test may have left a loop in this thread
        return pool.submit(asyncio.run, connect()).result(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_it_keeps_other_users_off_the_batch_socket(batch_stack, make_user, session_cookie, client):
    alice, bob = make_user(), make_user()
    batch, _ = _world(alice)
    bob_cookie = session_cookie(bob)
    client.logout()
    with pytest.raises(websockets.InvalidStatus) as refused:
        _connect(batch_stack["url"], batch.pk, bob_cookie)
    assert refused.value.response.status_code == 403
    first = _connect(batch_stack["url"], batch.pk, session_cookie(alice))
    assert f'id="batch-{batch.pk}-progress"' in first and "100.0 %" in first


@pytest.mark.django_db
def test_it_answers_404_to_other_users_and_escapes_output(client, make_user):
    alice, bob = make_user(), make_user()
    batch, item = _world(alice)
    client.force_login(bob)
    for method, url in [
        ("get", f"/batch/{batch.pk}/"), ("get", f"/batch/{batch.pk}/results/"),
        ("get", f"/batch/{batch.pk}/export.csv"), ("post", f"/batch/{batch.pk}/cancel/"),
        ("post", f"/batch/{batch.pk}/delete/"), ("post", f"/batch/{batch.pk}/{item.pk}/loom/"),
        ("get", f"/batch/{batch.pk}/{item.pk}/workbench/"),
        ("post", f"/batch/{batch.pk}/{item.pk}/retry/"),
    ]:  # fmt: skip
        assert getattr(client, method)(url).status_code == 404, url
    assert HOSTILE not in client.get("/batch/").content.decode()  # not listed for bob
    assert Batch.objects.filter(pk=batch.pk, state="done").exists()

    client.force_login(alice)
    page = client.get(f"/batch/{batch.pk}/").content.decode()
    assert HOSTILE not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert HOSTILE not in client.get("/batch/").content.decode()


@pytest.mark.django_db
def test_it_opens_a_row_in_the_loom_and_the_workbench(client, make_user):
    user = make_user()
    batch, item = _world(user)
    client.force_login(user)
    response = client.post(f"/batch/{batch.pk}/{item.pk}/loom/")
    tree = Tree.objects.get(owner=user)
    assert response.status_code == 302 and response["Location"] == f"/loom/{tree.pk}/"
    assert tree.root.text == item.prompt
    assert [n.text for n in tree.root.kids.all()] == [f" {HOSTILE}"]
    # No generation kept (e.g. expired after 7 days): the Workbench link says so.
    response = client.get(f"/batch/{batch.pk}/{item.pk}/workbench/")
    assert response.status_code == 302 and response["Location"] == f"/batch/{batch.pk}/"
