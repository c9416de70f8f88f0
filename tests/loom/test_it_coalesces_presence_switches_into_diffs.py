"""Presence is announced per socket at most every WEFT_PRESENCE_INTERVAL_SECONDS:
30 node switches in a burst reach the tree's other pages as a couple of updates, the
last of them where the page ended up — each a diff through the channel layer, so no
socket re-reads the tree's presence hash for every switch."""

import asyncio
import json

import pytest

from tests.loom.livews import next_kind, tree_socket
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_sends_a_burst_of_switches_as_one_or_two_updates(settings, make_user, make_tree):
    settings.WEFT_PRESENCE_INTERVAL_SECONDS = 0.25
    ann, ben = make_user("ann"), make_user("ben")
    tree = make_tree(ann)
    kids = [tree.root.add_child(f" child {i}") for i in range(30)]
    share(tree, ben, "viewer")
    seen: list[dict] = []

    async def scenario():
        a, b = tree_socket(ann, tree.pk), tree_socket(ben, tree.pk)
        assert (await a.connect())[0]
        await next_kind(a, "presence")
        assert (await b.connect())[0]
        for kid in kids:
            await b.send_json_to({"here": kid.pk})
        loop = asyncio.get_running_loop()
        until = loop.time() + 1.5
        while loop.time() < until:
            if await a.receive_nothing(timeout=0.05):
                continue
            message = json.loads(await a.receive_from())
            if message["kind"] == "presence":
                seen.append(message)
        await b.disconnect()
        gone = await next_kind(a, "presence")
        await a.disconnect()
        return gone

    gone = asyncio.run(scenario())
    assert 1 <= len(seen) <= 2, seen
    assert seen[-1]["people"][0]["node"] == kids[-1].pk
    assert gone["people"] == []


def test_it_never_reads_the_whole_presence_hash_per_switch(
    settings, make_user, make_tree, monkeypatch
):
    settings.WEFT_PRESENCE_INTERVAL_SECONDS = 0.0  # every switch announced: none coalesced
    from loom import consumers

    ann, ben = make_user("ann"), make_user("ben")
    tree = make_tree(ann)
    kids = [tree.root.add_child(f" child {i}") for i in range(10)]
    share(tree, ben, "viewer")
    reads = []
    real = consumers.TreeConsumer._resync

    async def counted(self):
        reads.append(self.channel_name)
        await real(self)

    monkeypatch.setattr(consumers.TreeConsumer, "_resync", counted)

    async def scenario():
        a, b = tree_socket(ann, tree.pk), tree_socket(ben, tree.pk)
        assert (await a.connect())[0] and (await b.connect())[0]
        await next_kind(a, "presence")
        for kid in kids:
            await b.send_json_to({"here": kid.pk})
            last = await next_kind(a, "presence")
            while last["people"][0]["node"] != kid.pk:
                last = await next_kind(a, "presence")
        await b.disconnect()
        await a.disconnect()
        return last

    last = asyncio.run(scenario())
    assert last["people"][0]["node"] == kids[-1].pk
    assert len(reads) == 2  # once per socket, when it opened
