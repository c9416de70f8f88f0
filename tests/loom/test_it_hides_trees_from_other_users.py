import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
import websockets

from loom.models import Author, Node, Tree

pytestmark = pytest.mark.django_db


def test_it_answers_404_to_another_user_everywhere(client, make_user, make_tree):
    owner, intruder = make_user("owner"), make_user("intruder")
    tree = make_tree(owner, prompt="secret prompt")
    node = tree.root.add_child(" secret child")
    node.toggle_bookmark()
    client.force_login(intruder)
    t, n = tree.pk, node.pk
    gets = [
        f"/loom/{t}/",
        f"/loom/{t}/n/{n}/",
        f"/loom/{t}/search/?q=secret",
        f"/loom/{t}/n/{n}/bookmark/next/",
        *[f"/loom/{t}/export/{fmt}/" for fmt in ("weft", "pyloom", "jsonl", "txt", "md")],
    ]
    posts = [
        f"/loom/{t}/rename/",
        f"/loom/{t}/duplicate/",
        f"/loom/{t}/delete/",
        f"/loom/{t}/undo/",
        f"/loom/{t}/n/{n}/generate/",
        *[
            f"/loom/{t}/n/{n}/{action}/"
            for action in (
                "edit",
                "child",
                "split",
                "merge",
                "move",
                "delete",
                "bookmark",
                "alternative",
            )
        ],
    ]
    for url in gets:
        for htmx in ({}, {"HTTP_HX_REQUEST": "true"}):
            assert client.get(url, **htmx).status_code == 404, url
    for url in posts:
        response = client.post(
            url, {"text": "pwned", "offset": 1, "target": tree.root.pk, "title": "x"}
        )
        assert response.status_code == 404, url
    # Nothing changed, nothing leaked into the intruder's own search.
    assert (
        Tree.objects.get(pk=t).title == tree.title and Node.objects.filter(tree=tree).count() == 2
    )
    assert Node.objects.get(pk=n).text == " secret child" and tree.undo_log.count() == 2
    found = client.get("/loom/?q=secret").text
    assert "secret child" not in found and "secret prompt" not in found and "0 matches" in found
    # Moving one's own node under someone else's node is refused too.
    mine = make_tree(intruder, prompt="mine")
    kid = mine.root.add_child("k")
    assert client.post(f"/loom/{mine.pk}/n/{kid.pk}/move/", {"target": n}).status_code == 302
    assert Node.objects.get(pk=kid.pk).parent_id == mine.root.pk


@pytest.mark.django_db(transaction=True)
def test_it_refuses_another_users_generation_socket_and_result(
    loom_stack, make_user, make_tree, session_cookie, client
):
    from completions.models import Generation

    owner, intruder = make_user("gen-owner"), make_user("gen-intruder")
    tree = make_tree(owner, prompt="p")
    g = Generation.objects.create(
        owner=owner, kind="loom", params={"prompt": "p", "max_tokens": 1}, target={"tree": tree.pk, "parent": tree.root.pk},
        state="done", choices=[{"index": 0, "text": " x", "finish_reason": "length"}],
    )  # fmt: skip
    url = loom_stack["url"].replace("http://", "ws://") + f"/ws/generations/{g.pk}/"

    async def connect(user):
        headers = {"Cookie": f"sessionid={session_cookie(user)}", "Origin": loom_stack["url"]}
        async with websockets.connect(url, additional_headers=headers) as ws:
            return await asyncio.wait_for(ws.recv(), 10)

    def run(coro):
        # In its own thread: Playwright's sync API may hold this thread's event loop.
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, coro).result()

    assert f"gen-{g.pk}-state" in run(connect(owner))  # the owner is let in
    with pytest.raises(websockets.InvalidStatus) as refused:
        run(connect(intruder))
    assert refused.value.response.status_code == 403
    client.force_login(intruder)
    assert client.get(f"/generations/{g.pk}/result/").status_code == 404
    assert client.post("/loom/recover/", {"generation": g.pk, "tree": tree.pk}).status_code == 404
    assert not Node.objects.filter(tree=tree, author=Author.MODEL).exists()
