"""A role change reaches the open sockets at once (the access.changed message): a
downgraded member's page is told its new role (it re-reads its controls); a revoked
one is told "You no longer have access to this tree" and its socket is closed."""

import asyncio

import pytest

from loom.consumers import REVOKED_CLOSE
from tests.loom.livews import in_thread, next_kind, tree_socket
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_tells_a_downgraded_member_and_closes_a_revoked_ones_socket(make_user, make_tree):
    owner, member = make_user(), make_user()
    tree = make_tree(owner)
    share(tree, member, "editor")

    async def scenario():
        mine = tree_socket(owner, tree.pk)
        theirs = tree_socket(member, tree.pk)
        assert (await mine.connect())[0] and (await theirs.connect())[0]
        await next_kind(theirs, "hello")
        await in_thread(share, tree, member, "viewer")
        role = await next_kind(theirs, "role")
        await in_thread(share, tree, member, None)
        revoked = await next_kind(theirs, "revoked")
        closed = await theirs.receive_output(timeout=5)
        # The owner's socket stays open and hears nothing of it.
        owner_quiet = await mine.receive_nothing(timeout=0.3) or await _only_presence(mine)
        await mine.disconnect()
        return role, revoked, closed, owner_quiet

    role, revoked, closed, owner_quiet = asyncio.run(scenario())
    assert role == {"kind": "role", "role": "viewer"}
    assert revoked["message"] == "You no longer have access to this tree."
    assert closed == {"type": "websocket.close", "code": REVOKED_CLOSE}
    assert owner_quiet


async def _only_presence(ws) -> bool:
    import json

    while not await ws.receive_nothing(timeout=0.3):
        if json.loads(await ws.receive_from())["kind"] not in ("hello", "presence"):
            return False
    return True
