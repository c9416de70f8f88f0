"""Every change to a tree reaches its open pages as one small event once it commits:
which nodes it touched, who made it and whether it came from this page (so that page
ignores its own echo; the page's id itself is never sent) — ids and a username, never
the text. A change rolled back tells nobody."""

import asyncio

import pytest

from loom.models import Node
from tests.loom.livews import in_thread, next_kind, tree_socket
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_publishes_an_editors_edit_with_who_and_which_page(make_user, make_tree, client):
    owner, editor = make_user(), make_user("bea")
    tree = make_tree(owner, prompt="The <b>root</b>")
    root = tree.root
    child = root.add_child("a secret continuation")
    share(tree, editor, "editor")
    client.force_login(editor)

    async def scenario():
        ws = tree_socket(owner, tree.pk)
        assert (await ws.connect())[0]
        await next_kind(ws, "hello")
        response = await in_thread(
            client.post,
            f"/loom/{tree.pk}/n/{child.pk}/edit/",
            {"text": "changed by bea", "version": "1"},
            headers={"HX-Request": "true", "X-Weft-Client": "page-b"},
        )
        event = await next_kind(ws, "event")
        await ws.disconnect()
        return response, event

    response, event = asyncio.run(scenario())
    assert response.status_code == 200
    assert event["event"] == "edit" and child.pk in event["ids"]
    assert (event["by"], event["name"], event["own"]) == (editor.pk, "bea", False)
    assert "client" not in event and "page-b" not in str(event)
    assert "secret" not in str(event) and "changed by" not in str(event)
    assert Node.objects.get(pk=child.pk).version == 2


def test_it_tells_nobody_of_a_refused_change(make_user, make_tree, client):
    owner = make_user()
    tree = make_tree(owner)
    client.force_login(owner)

    async def scenario():
        ws = tree_socket(owner, tree.pk)
        assert (await ws.connect())[0]
        await next_kind(ws, "hello")
        # The root cannot be deleted: refused, rolled back, nothing published.
        await in_thread(
            client.post, f"/loom/{tree.pk}/n/{tree.root.pk}/delete/", headers={"HX-Request": "true"}
        )
        await in_thread(
            client.post,
            f"/loom/{tree.pk}/n/{tree.root.pk}/bookmark/",
            headers={"HX-Request": "true"},
        )
        event = await next_kind(ws, "event")
        await ws.disconnect()
        return event

    assert asyncio.run(scenario())["event"] == "bookmark"
