"""ws/loom/<tree>/: the owner and the users the tree is shared with join it; a
stranger (and an anonymous socket) is refused before the socket is accepted."""

import asyncio

import pytest
from django.contrib.auth.models import AnonymousUser

from tests.loom.livews import next_kind, tree_socket
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_lets_the_owner_and_members_in_and_keeps_strangers_out(make_user, make_tree):
    owner, editor, viewer, stranger = make_user(), make_user(), make_user(), make_user()
    tree = make_tree(owner)
    share(tree, editor, "editor")
    share(tree, viewer, "viewer")

    async def join(user):
        ws = tree_socket(user, tree.pk)
        connected, _ = await ws.connect()
        hello = await next_kind(ws, "hello") if connected else None
        await ws.disconnect()
        return connected, hello

    async def scenario():
        return [await join(u) for u in (owner, editor, viewer, stranger, AnonymousUser())]

    results = asyncio.run(scenario())
    assert [r[0] for r in results] == [True, True, True, False, False]
    assert [r[1]["role"] for r in results[:3]] == ["owner", "editor", "viewer"]


def test_it_refuses_a_tree_that_does_not_exist(make_user):
    user = make_user()

    async def scenario():
        connected, _ = await tree_socket(user, 987654321).connect()
        return connected

    assert asyncio.run(scenario()) is False
