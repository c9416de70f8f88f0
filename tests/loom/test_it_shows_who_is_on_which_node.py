"""Presence: each page of a tree says which node it is on; the tree's other pages are
told who is where (one entry per user, their initials and a colour), kept in Redis so
every web process sees it, and dropped when the page's socket goes. A node of another
tree is not taken."""

import asyncio

import pytest

from tests.loom.livews import next_kind, tree_socket
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_tells_the_others_who_is_on_which_node(make_user, make_tree):
    ann, ben = make_user("ann"), make_user("ben_lee")
    tree = make_tree(ann)
    other = make_tree(ben)
    kid = tree.root.add_child(" a child")
    share(tree, ben, "viewer")

    async def scenario():
        a, b = tree_socket(ann, tree.pk), tree_socket(ben, tree.pk)
        assert (await a.connect())[0]
        await next_kind(a, "presence")
        assert (await b.connect())[0]
        await b.send_json_to({"here": other.root.pk})  # not this tree's: ignored
        await b.send_json_to({"here": kid.pk})
        seen = await next_kind(a, "presence")
        while not seen["people"]:
            seen = await next_kind(a, "presence")
        await b.disconnect()
        gone = await next_kind(a, "presence")
        await a.disconnect()
        return seen, gone

    seen, gone = asyncio.run(scenario())
    assert seen["people"] == [
        {"user": ben.pk, "name": "ben_lee", "initials": "BL", "node": kid.pk, "colour": ben.pk % 8}
    ]
    assert gone["people"] == []
