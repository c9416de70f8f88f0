import asyncio

import pytest
import websockets

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_a_socket_without_a_session(stack):
    ws_url = stack["url"].replace("http://", "ws://") + "/ws/ping/"

    async def connect():
        async with websockets.connect(ws_url, additional_headers={"Origin": stack["url"]}):
            pass

    with pytest.raises(websockets.InvalidStatus) as refused:
        asyncio.run(connect())
    assert refused.value.response.status_code == 403


def test_it_refuses_a_socket_from_another_origin(stack, make_user, session_cookie):
    cookie = session_cookie(make_user())
    ws_url = stack["url"].replace("http://", "ws://") + "/ws/ping/"

    async def connect():
        headers = {"Cookie": f"sessionid={cookie}", "Origin": "http://evil.example"}
        async with websockets.connect(ws_url, additional_headers=headers):
            pass

    with pytest.raises(websockets.InvalidStatus) as refused:
        asyncio.run(connect())
    assert refused.value.response.status_code == 403
