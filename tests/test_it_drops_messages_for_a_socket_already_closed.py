"""A progress or token message that reaches a consumer after the browser closed its
socket is dropped, not raised out of the consumer (uvicorn answers such a send with
RuntimeError, which Channels would log as an ASGI crash)."""

import asyncio

import pytest

from core.consumers import OwnerConsumer


class Closed(OwnerConsumer):
    async def authorize(self) -> list[str]:
        return ["g"]


def closed_server_send(error: BaseException):
    sent = []

    async def send(message):
        sent.append(message)
        raise error

    return send, sent


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("Unexpected ASGI message 'websocket.send', after sending 'websocket.close'"),
        ConnectionResetError(),
    ],
)
def test_it_drops_a_send_after_the_socket_closed(error):
    consumer = Closed()
    consumer.base_send, sent = closed_server_send(error)
    asyncio.run(consumer.send(text_data="<div>late</div>"))
    assert sent == [{"type": "websocket.send", "text": "<div>late</div>"}]


def test_it_still_raises_what_is_not_a_closed_socket():
    consumer = Closed()
    consumer.base_send, _ = closed_server_send(ValueError("a bug"))
    with pytest.raises(ValueError):
        asyncio.run(consumer.send(text_data="x"))
