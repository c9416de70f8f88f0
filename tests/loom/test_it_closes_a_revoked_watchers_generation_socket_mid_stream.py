"""A member watching a generation that grows their tree (its text is the tree's) loses
it mid-stream when their access goes: the generation's socket is told in its state
badge and closed, and nothing more of the stream reaches it; the owner's socket on the
same run streams on. (Before, the generation socket checked access only when it
opened: a revoked viewer kept receiving a running generation's tokens.)"""

import asyncio

import pytest
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from completions.consumers import LOST_CLOSE
from completions.models import Generation
from completions.streaming import group_name
from config.routing import websocket_urlpatterns
from tests.loom.livews import in_thread
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db(transaction=True)


def generation_socket(user, generation_id):
    ws = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/generations/{generation_id}/"
    )
    ws.scope["user"] = user
    return ws


def test_it_closes_the_generation_socket_of_a_member_whose_access_goes(make_user, make_tree):
    owner, viewer = make_user(), make_user()
    tree = make_tree(owner)
    share(tree, viewer, "viewer")
    generation = Generation.objects.create(
        owner=owner,
        kind="loom",
        params={},
        state="running",
        choices=[{"index": 0, "text": ""}],
        target={"tree": tree.pk, "parent": tree.root.pk},
    )
    gid = generation.pk

    async def stream(stop: asyncio.Event):
        layer = get_channel_layer()
        i = 0
        while not stop.is_set():
            await layer.group_send(
                group_name(gid), {"type": "gen.tokens", "items": [[0, f" t{i}"]]}
            )
            i += 1
            await asyncio.sleep(0.01)

    async def drain(ws, into: list, until_close: bool):
        while True:
            out = await ws.receive_output(timeout=5)
            into.append(out)
            if out["type"] == "websocket.close" and until_close:
                return

    async def scenario():
        mine, theirs = generation_socket(owner, gid), generation_socket(viewer, gid)
        assert (await mine.connect())[0] and (await theirs.connect())[0]
        await mine.receive_from(timeout=5)
        await theirs.receive_from(timeout=5)
        stop = asyncio.Event()
        pusher = asyncio.ensure_future(stream(stop))
        before: list = []
        await asyncio.sleep(0.3)
        while not await theirs.receive_nothing(timeout=0.01):
            before.append(await theirs.receive_output())
        await in_thread(share, tree, viewer, None)
        loop = asyncio.get_running_loop()
        revoked_at = loop.time()
        after: list = []
        await asyncio.wait_for(drain(theirs, after, True), 5)
        closed_in = loop.time() - revoked_at
        quiet = await theirs.receive_nothing(timeout=0.3)
        owner_got: list = []
        while not await mine.receive_nothing(timeout=0.05):
            owner_got.append(await mine.receive_output())
        await asyncio.sleep(0.2)
        owner_later = not await mine.receive_nothing(timeout=0.5)
        stop.set()
        await pusher
        await mine.disconnect()
        return before, after, closed_in, quiet, owner_later

    before, after, closed_in, quiet, owner_later = asyncio.run(scenario())
    assert len(before) > 5  # it was streaming to the viewer
    notice = [m["text"] for m in after if m["type"] == "websocket.send"]
    assert any("You no longer have access to this run." in text for text in notice), notice
    assert after[-1] == {"type": "websocket.close", "code": LOST_CLOSE}
    assert closed_in < 2.0 and quiet
    assert owner_later  # the owner's socket streams on
