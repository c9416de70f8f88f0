"""Sockets are capped per person, per person on a tree and per tree, counted in Redis
across every web process: a socket over a cap is accepted, told why and closed with
LIMIT_CLOSE (4429, which neither the ws extension nor loomlive.js reconnects on); the
other people are unaffected; a closed socket frees its place at once, and a place
held by a web process that died (a lease nobody renews) frees itself when it expires."""

import asyncio
import json
import time

import pytest
import redis

from core.consumers import LIMIT_CLOSE
from tests.loom.livews import next_kind, tree_socket
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_one_persons_socket_over_the_tree_cap_and_not_anothers(
    settings, make_user, make_tree
):
    settings.WEFT_WS_PER_USER_TREE = 2
    ann, ben = make_user(), make_user()
    tree = make_tree(ann)
    share(tree, ben, "viewer")

    async def scenario():
        first, second = tree_socket(ann, tree.pk), tree_socket(ann, tree.pk)
        assert (await first.connect())[0] and (await second.connect())[0]
        third = tree_socket(ann, tree.pk)
        assert (await third.connect())[0]  # accepted, to be told why
        told = json.loads(await third.receive_from(timeout=5))
        closed = await third.receive_output(timeout=5)
        theirs = tree_socket(ben, tree.pk)
        assert (await theirs.connect())[0]
        hello = await next_kind(theirs, "hello")
        # One of ann's pages closes: her place is free again at once.
        await second.disconnect()
        again = tree_socket(ann, tree.pk)
        assert (await again.connect())[0]
        hello_again = await next_kind(again, "hello")
        for ws in (first, again, theirs):
            await ws.disconnect()
        return told, closed, hello, hello_again

    told, closed, hello, hello_again = asyncio.run(scenario())
    assert told["kind"] == "closed" and "too many pages open of this tree" in told["message"]
    assert closed == {"type": "websocket.close", "code": LIMIT_CLOSE}
    assert hello["role"] == "viewer" and hello_again["role"] == "owner"


def test_it_counts_other_processes_sockets_until_their_lease_expires(
    settings, make_user, make_tree
):
    settings.WEFT_WS_PER_USER = 3
    ann = make_user()
    tree = make_tree(ann)
    store = redis.Redis.from_url(settings.REDIS_URL)
    key = f"weft:ws:user:{ann.pk}"
    # Three sockets in other web processes, one of which died 40 s ago (never renewed).
    now = time.time()
    store.zadd(key, {"elsewhere-1": now + 30, "elsewhere-2": now + 30, "dead": now - 10})

    async def attempt():
        ws = tree_socket(ann, tree.pk)
        assert (await ws.connect())[0]
        first = json.loads(await ws.receive_from(timeout=5))
        if first["kind"] == "closed":
            return first, await ws.receive_output(timeout=5)
        await ws.disconnect()
        return first, None

    try:
        accepted, _ = asyncio.run(attempt())  # the dead one's place is free
        store.zadd(key, {"elsewhere-3": time.time() + 30})
        refused, closed = asyncio.run(attempt())
    finally:
        store.delete(key)
    assert accepted["kind"] == "hello"
    assert refused["kind"] == "closed" and "too many pages open." in refused["message"]
    assert closed == {"type": "websocket.close", "code": LIMIT_CLOSE}


def test_it_caps_the_sockets_on_one_tree(settings, make_user, make_tree):
    settings.WEFT_WS_PER_TREE = 1
    ann, ben = make_user(), make_user()
    tree, bens_own = make_tree(ann), make_tree(ben)
    share(tree, ben, "editor")

    async def scenario():
        mine = tree_socket(ann, tree.pk)
        assert (await mine.connect())[0]
        theirs = tree_socket(ben, tree.pk)
        assert (await theirs.connect())[0]
        told = json.loads(await theirs.receive_from(timeout=5))
        closed = await theirs.receive_output(timeout=5)
        # Their own tree is another tree: not full.
        own = tree_socket(ben, bens_own.pk)
        assert (await own.connect())[0]
        hello = await next_kind(own, "hello")
        await own.disconnect()
        await mine.disconnect()
        return told, closed, hello

    told, closed, hello = asyncio.run(scenario())
    assert "on this tree" in told["message"] and closed["code"] == LIMIT_CLOSE
    assert hello["role"] == "owner"


def test_it_counts_generation_sockets_against_the_persons_cap(settings, make_user, make_tree):
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from completions.models import Generation
    from config.routing import websocket_urlpatterns

    settings.WEFT_WS_PER_USER = 1
    ann, ben = make_user(), make_user()
    tree = make_tree(ann)
    share(tree, ben, "viewer")
    run = Generation.objects.create(
        owner=ann, kind="loom", params={}, state="running", target={"tree": tree.pk}
    )

    def watch(user):
        ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/generations/{run.pk}/")
        ws.scope["user"] = user
        return ws

    async def scenario():
        page = tree_socket(ann, tree.pk)
        assert (await page.connect())[0]
        second = watch(ann)
        assert (await second.connect())[0]
        told = await second.receive_from(timeout=5)
        closed = await second.receive_output(timeout=5)
        theirs = watch(ben)
        assert (await theirs.connect())[0]
        streaming = await theirs.receive_from(timeout=5)
        await theirs.disconnect()
        await page.disconnect()
        return told, closed, streaming

    told, closed, streaming = asyncio.run(scenario())
    assert f'id="gen-{run.pk}-state"' in told and "too many pages open" in told
    assert 'role="alert"' in told and closed["code"] == LIMIT_CLOSE
    assert f'id="gen-{run.pk}-state"' in streaming and "too many" not in streaming
