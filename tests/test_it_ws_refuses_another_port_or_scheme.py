"""The WebSocket handshake's Origin must be exactly this site — scheme, host and port
(or one of CSRF_TRUSTED_ORIGINS): a page of another program on the same host, on
another port or over the other scheme, is refused (HTTP 403) even with the user's
session cookie, which the browser sends it."""

import asyncio

import pytest
import websockets

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_accepts_only_the_exact_origin(stack, make_user, session_cookie):
    cookie = session_cookie(make_user())
    base = stack["url"]  # http://127.0.0.1:<port>
    port = int(base.rsplit(":", 1)[1])
    ws_url = base.replace("http://", "ws://") + "/ws/ping/"

    async def status(origin):
        headers = {"Cookie": f"sessionid={cookie}", "Origin": origin}
        try:
            async with websockets.connect(ws_url, additional_headers=headers):
                return 101
        except websockets.InvalidStatus as refused:
            return refused.response.status_code

    async def scenario():
        return [
            await status(origin)
            for origin in (
                base,
                f"http://127.0.0.1:{port + 1}",
                f"https://127.0.0.1:{port}",
                "http://127.0.0.1",
                f"http://localhost:{port}",
                "null",
            )
        ]

    assert asyncio.run(scenario()) == [101, 403, 403, 403, 403, 403]
