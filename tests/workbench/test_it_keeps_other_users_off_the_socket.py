"""ws/generations/<id>/ streams a run to its owner only (the real ASGI server)."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
import websockets

from tests.workbench.helpers import make_generation


def _connect(base_url: str, generation_id: int, cookie: str) -> str:
    """The first message the socket gets; raises websockets.InvalidStatus if refused."""
    url = base_url.replace("http://", "ws://") + f"/ws/generations/{generation_id}/"

    async def connect():
        headers = {"Cookie": f"sessionid={cookie}", "Origin": base_url}
        async with websockets.connect(url, additional_headers=headers) as ws:
            return await asyncio.wait_for(ws.recv(), 10)

    # Its own thread: a browser test may have left an event loop in this one.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, connect()).result(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_it_keeps_other_users_off_the_socket(wb_stack, make_user, session_cookie, client):
    alice, bob = make_user(), make_user()
    generation = make_generation(alice, texts=["alice only"])
    bob_cookie = session_cookie(bob)
    client.logout()
    alice_cookie = session_cookie(alice)

    with pytest.raises(websockets.InvalidStatus) as refused:
        _connect(wb_stack["url"], generation.pk, bob_cookie)
    assert refused.value.response.status_code == 403

    first = _connect(wb_stack["url"], generation.pk, alice_cookie)
    assert f"gen-{generation.pk}-state" in first
    assert f"/generations/{generation.pk}/result/" in first
