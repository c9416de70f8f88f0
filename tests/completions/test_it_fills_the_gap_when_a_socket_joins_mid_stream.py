"""A socket that joins a running generation after its last checkpoint was written
missed what was published in between: its page shows the stream on at once, after a
hole, and as soon as a checkpoint covers the hole the choice is replaced by it and
what came since is sent again against it — so the live text is the whole text, once
and in order, mid-stream and when the run ends (issue 14)."""

import asyncio

import pytest

from tests.completions.midstream import Socket, Worker, running_generation

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_mends_the_gap_in_plain_text(make_user):
    user = make_user()
    generation = running_generation(user, n=2)

    async def scenario():
        worker = await Worker.listening(generation)
        worker.chunk(0, "Hello")
        worker.chunk(1, "Bonjour")
        await worker.checkpoint()
        # Published after that checkpoint, before the socket joins: the gap.
        worker.chunk(0, " world")
        worker.chunk(1, " le monde")
        await worker.delivered()

        socket = await Socket.connected(user, generation.pk)
        assert socket.page.text(0) == "Hello" and socket.page.text(1) == "Bonjour"
        worker.chunk(0, " again")
        worker.chunk(1, " encore")
        # Not held back: the stream goes on after the hole.
        await socket.until(lambda page: page.text(1).endswith(" encore"))
        assert socket.page.text(0) == "Hello again"
        await worker.checkpoint()
        await asyncio.sleep(0.3)  # past the socket's next look at the checkpoint
        worker.chunk(0, " & <more>")
        worker.chunk(1, " et plus")
        # Mended mid-stream, by the checkpoint: the run has not ended.
        await socket.until(lambda page: page.text(1).endswith(" et plus"))
        mended = (socket.page.text(0), socket.page.text(1))
        worker.chunk(0, ".")
        await worker.finish()
        return worker, mended, await socket.until_final()

    worker, mended, page = asyncio.run(scenario())
    assert mended == ("Hello world again & <more>", "Bonjour le monde encore et plus")
    assert page.text(0) == "Hello world again & <more>." == worker.shown(0)
    assert page.text(1) == "Bonjour le monde encore et plus" == worker.shown(1)


def test_it_mends_the_gap_in_token_chips(make_user):
    user = make_user()
    generation = running_generation(user, n=1)

    async def scenario():
        worker = await Worker.listening(generation)
        worker.chunk(0, "The", ["The"])
        worker.chunk(0, " cat", [" cat"])
        await worker.checkpoint()
        worker.chunk(0, " sat", [" sat"])
        worker.chunk(0, " on", [" on"])
        await worker.delivered()  # "The", " cat", " sat" went out; " on" is held back

        socket = await Socket.connected(user, generation.pk)
        assert socket.page.text(0) == "The cat"
        worker.chunk(0, " the", [" the"])
        worker.chunk(0, " mat", [" mat"])
        await worker.checkpoint()
        await asyncio.sleep(0.3)
        worker.chunk(0, ".", ["."])  # sends " mat" (the mend comes with it), keeps "."
        await socket.until(lambda page: page.text(0).endswith(" mat"))
        mended = list(socket.page.choices[0])
        worker.chunk(0, "", ["<|im_end|>"])
        await worker.finish()
        return worker, mended, await socket.until_final()

    worker, mended, page = asyncio.run(scenario())
    assert mended == ["The", " cat", " sat", " on", " the", " mat"]
    assert page.text(0) == "The cat sat on the mat.<|im_end|>" == worker.shown(0)
    # Every chip once: the page's pieces are the saved result's chips.
    assert page.choices[0] == ["The", " cat", " sat", " on", " the", " mat", ".", "<|im_end|>"]


def test_it_mends_the_gap_with_the_saved_text_when_the_run_ends_first(make_user):
    user = make_user()
    generation = running_generation(user, n=1)

    async def scenario():
        worker = await Worker.listening(generation)
        worker.chunk(0, "one")
        await worker.checkpoint()
        worker.chunk(0, " two")
        await worker.delivered()
        socket = await Socket.connected(user, generation.pk)
        worker.chunk(0, " three")
        # No checkpoint any more: the worker stops its checkpoint thread before the
        # final save, which holds the whole text.
        await worker.finish()
        return worker, await socket.until_final()

    worker, page = asyncio.run(scenario())
    assert page.text(0) == "one two three" == worker.shown(0)
