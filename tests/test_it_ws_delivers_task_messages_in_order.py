import asyncio

import pytest
import websockets

from core.tasks import ping_burst

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_delivers_100_task_messages_in_order(stack, make_user, session_cookie):
    user = make_user()
    cookie = session_cookie(user)
    ws_url = stack["url"].replace("http://", "ws://") + "/ws/ping/"

    async def receive_burst() -> list[str]:
        headers = {"Cookie": f"sessionid={cookie}", "Origin": stack["url"]}
        async with websockets.connect(ws_url, additional_headers=headers) as ws:
            # Sent through the real broker to the real worker, which group_sends.
            ping_burst.delay(user.pk, 100)
            return [await asyncio.wait_for(ws.recv(), 15) for _ in range(100)]

    assert asyncio.run(receive_burst()) == [str(i) for i in range(100)]
