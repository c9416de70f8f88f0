"""A socket that joins a running generation sends the checkpoint first; the checkpoint
can hold text the publisher has not sent yet (the worker adds a chunk to it before
publishing, and token chips wait for their text), so what then arrives overlaps it:
the socket sends only what the page lacks — each character once, in order — while a
socket that watched from the start gets the stream as it is (issue 14)."""

import asyncio

import pytest

from tests.completions.midstream import Socket, Worker, running_generation

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_skips_plain_text_the_checkpoint_held(make_user):
    user = make_user()
    generation = running_generation(user, n=2)

    async def scenario():
        worker = await Worker.listening(generation)
        watching = await Socket.connected(user, generation.pk)
        worker.chunk(0, "Once")
        worker.chunk(1, "Il était")
        # Added to the accumulator and checkpointed, published only after the join.
        late = [worker.add(0, " upon"), worker.add(1, " une fois")]
        await worker.checkpoint()
        await worker.delivered()

        joining = await Socket.connected(user, generation.pk)
        assert joining.page.text(0) == "Once upon"
        for choice in late:
            worker.publish(choice)
        worker.chunk(0, " a <time>")
        worker.chunk(1, " & voilà")
        await worker.finish()
        return worker, await watching.until_final(), await joining.until_final()

    worker, watching, joining = asyncio.run(scenario())
    for page in (watching, joining):
        assert page.text(0) == "Once upon a <time>" == worker.shown(0)
        assert page.text(1) == "Il était une fois & voilà" == worker.shown(1)


def test_it_sends_the_uncovered_tail_of_a_token_chip(make_user):
    user = make_user()
    generation = running_generation(user, n=2)

    async def scenario():
        worker = await Worker.listening(generation)
        watching = await Socket.connected(user, generation.pk)
        # The backend holds text back (a stop string might match), so text and tokens
        # do not line up: the publisher sends "Hello" and keeps " world" back...
        worker.chunk(0, "Hel", ["Hello"])
        worker.chunk(0, "lo wor", [" world"])
        # ...and choice 1's stop token waits for the publisher's flush.
        worker.chunk(1, "Hi", ["Hi"])
        worker.chunk(1, "!", ["!"])
        worker.chunk(1, "", ["<|im_end|>"])
        await worker.checkpoint()  # "Hello wor" (its chips: "Hello", " wor"); "Hi!<|im_end|>"
        await worker.delivered()

        joining = await Socket.connected(user, generation.pk)
        assert joining.page.choices[0] == ["Hello", " wor"]
        assert joining.page.choices[1] == ["Hi", "!", "<|im_end|>"]
        # " world" arrives now as one chip, starting before what the page has.
        worker.chunk(0, "ld!", ["!"])
        worker.chunk(0, "", ["<|im_end|>"])
        await worker.finish()
        return worker, await watching.until_final(), await joining.until_final()

    worker, watching, joining = asyncio.run(scenario())
    assert worker.shown(0) == "Hello world!<|im_end|>" and worker.shown(1) == "Hi!<|im_end|>"
    assert watching.choices[0] == ["Hello", " world", "!", "<|im_end|>"]
    assert watching.choices[1] == ["Hi", "!", "<|im_end|>"]
    # The cut chip's tail "ld" as plain text, then the rest as chips; the stop token once.
    assert joining.choices[0] == ["Hello", " wor", "ld", "!", "<|im_end|>"]
    assert joining.choices[1] == ["Hi", "!", "<|im_end|>"]
    for page in (watching, joining):
        assert page.text(0) == worker.shown(0) and page.text(1) == worker.shown(1)
