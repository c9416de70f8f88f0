"""A generation streaming in this test process, as completions.pipeline.execute runs
it: per chunk the accumulator (the checkpoint's source) first, then the real
GroupPublisher; the checkpoint is written when the test says (the worker's
checkpoint thread). Sockets are the real GenerationConsumer behind a
WebsocketCommunicator, on the real Redis channel layer."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from completions.models import Generation, empty_choice
from completions.pipeline import Accumulator
from completions.streaming import GroupPublisher, group_name
from config.routing import websocket_urlpatterns
from core.tokens import chips_for
from tests.completions.wsclient import Page


def running_generation(user, n: int) -> Generation:
    return Generation.objects.create(
        owner=user,
        kind="workbench",
        params={},
        state="running",
        choices=[empty_choice(i) for i in range(n)],
    )


def logprobs(tokens: list[str]) -> dict[str, Any]:
    return {
        "tokens": tokens,
        "token_logprobs": [-0.5] * len(tokens),
        "top_logprobs": [{t: -0.5, "x": -2.0} for t in tokens],
        "text_offset": [0] * len(tokens),
    }


class Worker:
    def __init__(self, generation: Generation) -> None:
        self.generation_id = generation.pk
        # Made here, before the publisher's thread asks for it too: two threads making
        # the process's layer at once would each get their own.
        self.layer = get_channel_layer()
        self.acc = Accumulator([dict(c) for c in generation.choices], 0)
        self.publisher = GroupPublisher(generation.pk)
        self.probe: str | None = None
        self.seen: dict[int, int] = {}  # per choice, the end offset the probe saw last

    @classmethod
    async def listening(cls, generation: Generation) -> Worker:
        worker = cls(generation)
        await worker.listen()
        return worker

    async def listen(self) -> None:
        """A channel in the group that tells when a message has been delivered."""
        self.probe = await self.layer.new_channel()
        await self.layer.group_add(group_name(self.generation_id), self.probe)

    def add(self, index: int, text: str, tokens: list[str] | None = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": index, "text": text}
        if tokens is not None:
            choice["logprobs"] = logprobs(tokens)
        self.acc.add(choice)
        return choice

    def publish(self, choice: dict[str, Any]) -> None:
        self.publisher.token(choice["index"], choice["text"], choice.get("logprobs"))

    def chunk(self, index: int, text: str, tokens: list[str] | None = None) -> None:
        self.publish(self.add(index, text, tokens))

    async def checkpoint(self) -> None:
        await Generation.objects.filter(pk=self.generation_id).aupdate(**self.acc.snapshot())

    async def delivered(self) -> None:
        """Until every item published so far reached the group (a socket joining
        later cannot receive them)."""
        assert self.probe is not None, "listen() first"
        while any(self.seen.get(i, 0) < end for i, end in self.publisher.ends.items()):
            message = await asyncio.wait_for(self.layer.receive(self.probe), 5)
            for item in message.get("items", []):
                self.seen[item[0]] = item[3]

    async def finish(self) -> None:
        """Close the publisher (its flush), save the result and announce it, as
        lifecycle.finish does."""
        self.publisher.close()
        await Generation.objects.filter(pk=self.generation_id).aupdate(
            state="done", **self.acc.snapshot()
        )
        await self.layer.group_send(
            group_name(self.generation_id),
            {"type": "gen.state", "state": "done", "error_code": "", "request_id": ""},
        )

    def shown(self, index: int) -> str:
        """The whole choice as its saved result shows it: the text, or its chips'."""
        choice = self.acc.choices[index]
        chips = chips_for(choice["text"], choice["logprobs"])
        return choice["text"] if chips is None else "".join(c.text for c in chips)


class Socket:
    """One page's socket: its Page, fed with every message it receives."""

    def __init__(self, user, generation_id: int) -> None:
        self.communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/generations/{generation_id}/"
        )
        self.communicator.scope["user"] = user
        self.page = Page()

    @classmethod
    async def connected(cls, user, generation_id: int) -> Socket:
        socket = cls(user, generation_id)
        await socket.connect()
        return socket

    async def connect(self) -> None:
        connected, _ = await self.communicator.connect()
        assert connected
        self.page.feed(await self.communicator.receive_from(timeout=5))

    async def until(self, done, timeout: float = 15) -> None:
        while not done(self.page):
            self.page.feed(await self.communicator.receive_from(timeout=timeout))

    async def until_final(self, timeout: float = 15) -> Page:
        while not self.page.final:
            self.page.feed(await self.communicator.receive_from(timeout=timeout))
        await self.communicator.disconnect()
        return self.page
