"""The fault test's rare repeat ("after a backend timeout, a watching page's live view
can repeat tokens once"), made to happen every time: a socket that joins after a
checkpoint shows a hole, and the mend replaces the choice by a later checkpoint, then
sends again what came since the hole. The browser (Page: each fragment applied in
order) shows every character once; the tests' WebSocket client (Watcher) kept every
append after the replace as if the replace had not happened, so the stretch sent
before the mend was counted twice — and `published in saved text` failed whenever a
socket joined mid-stream with a gap (about one run in ten). The client now applies a
replace where it comes, as the page does."""

import asyncio

import pytest

from tests.completions.midstream import Socket, Worker, running_generation
from tests.completions.wsclient import Page, Watcher

pytestmark = pytest.mark.django_db(transaction=True)


class Both(Page):
    """The page and the tests' client, fed the same messages."""

    def __init__(self) -> None:
        super().__init__()
        self.watcher = Watcher()

    def feed(self, message: str) -> None:
        super().feed(message)
        self.watcher.feed(message)


def test_it_counts_every_character_once_across_a_mend(make_user):
    user = make_user()
    generation = running_generation(user, n=1)

    async def scenario():
        worker = await Worker.listening(generation)
        worker.chunk(0, "Once")
        await worker.checkpoint()
        worker.chunk(0, " upon")  # after the checkpoint, before the socket: the gap
        await worker.delivered()
        socket = Socket(user, generation.pk)
        socket.page = Both()
        await socket.connect()
        worker.chunk(0, " a")
        await socket.until(lambda page: page.text(0).endswith(" a"))
        await worker.checkpoint()
        await asyncio.sleep(0.3)  # past the socket's next look at the checkpoint
        worker.chunk(0, " time")  # the mend comes with it
        await socket.until(lambda page: page.text(0).endswith(" time"))
        live = (socket.page.text(0), socket.page.watcher.text(0),
                "".join(socket.page.watcher.tokens[0]))  # fmt: skip
        await worker.finish()
        await socket.until_final()
        return worker, live

    worker, (page_text, watched, published) = asyncio.run(scenario())
    saved = worker.shown(0)
    assert page_text == watched == saved == "Once upon a time"
    assert published in saved  # what the fault test asserts: a stretch of the saved text
