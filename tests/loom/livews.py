"""The tree socket under Channels' WebsocketCommunicator, as a given user."""

import asyncio
import json

from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from config.routing import websocket_urlpatterns


def tree_socket(user, tree_id: int) -> WebsocketCommunicator:
    ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/loom/{tree_id}/")
    ws.scope["user"] = user
    return ws


async def next_kind(ws, kind: str, timeout: float = 5.0) -> dict:
    """The next JSON message of this kind (presence updates in between are skipped)."""
    while True:
        message = json.loads(await ws.receive_from(timeout=timeout))
        if message.get("kind") == kind:
            return message


async def in_thread(fn, *args, **kwargs):
    """Run blocking code (the test client, share()) beside the sockets; the thread's
    database connection is closed after, so the test database can be dropped."""

    def run():
        from django.db import connections

        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return await asyncio.to_thread(run)
