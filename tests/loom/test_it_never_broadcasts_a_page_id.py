"""A page's own id (X-Weft-Client, and the "client" of its socket's messages) never
leaves the server: another member could make that page ignore their changes by
sending it as their own. Each socket is told instead whether an event is its own —
its user's, from its page — so a page still ignores its own echo, and a member who
sends another page's id does not make that page ignore them."""

import asyncio
import json

import pytest

from tests.loom.livews import in_thread, next_kind, tree_socket
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_tells_each_socket_which_events_are_its_own_without_the_ids(
    make_user, make_tree, client
):
    owner, editor = make_user(), make_user("bea")
    tree = make_tree(owner)
    child = tree.root.add_child(" a child")
    share(tree, editor, "editor")
    client.force_login(editor)
    received: dict[str, list[str]] = {"owner": [], "editor": []}

    async def collect(ws, who, until):
        while True:
            raw = await ws.receive_from(timeout=5)
            received[who].append(raw)
            if json.loads(raw).get("kind") == "event" and until(json.loads(raw)):
                return json.loads(raw)

    async def edit(version, page):
        return await in_thread(
            client.post,
            f"/loom/{tree.pk}/n/{child.pk}/edit/",
            {"text": f"edit {version}", "version": str(version)},
            headers={"HX-Request": "true", "X-Weft-Client": page},
        )

    async def scenario():
        mine, theirs = tree_socket(owner, tree.pk), tree_socket(editor, tree.pk)
        assert (await mine.connect())[0] and (await theirs.connect())[0]
        await mine.send_json_to({"here": child.pk, "client": "page-owner"})
        await theirs.send_json_to({"here": child.pk, "client": "page-bea"})
        await next_kind(mine, "hello")
        await next_kind(theirs, "hello")
        assert (await edit(1, "page-bea")).status_code == 200
        owner_saw = await collect(mine, "owner", lambda m: True)
        editor_saw = await collect(theirs, "editor", lambda m: True)
        # bea claims to be the owner's page: the owner's page still takes her change.
        assert (await edit(2, "page-owner")).status_code == 200
        spoofed = await collect(mine, "owner", lambda m: True)
        await mine.disconnect()
        await theirs.disconnect()
        return owner_saw, editor_saw, spoofed

    owner_saw, editor_saw, spoofed = asyncio.run(scenario())
    assert owner_saw["own"] is False and owner_saw["by"] == editor.pk
    assert editor_saw["own"] is True and "html" not in editor_saw
    assert spoofed["own"] is False
    for raw in received["owner"] + received["editor"]:
        assert "page-bea" not in raw and "page-owner" not in raw and '"client"' not in raw
