"""ws/loom/<tree id>/: a tree's open page, live (loom/live.py). The socket forwards
the tree's events as JSON (ids and usernames only; the page fetches the fragments),
keeps the page's presence, and re-checks the user's role when it changes: revoked,
the page is told and the socket closes; another role, the page re-reads its controls."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

import orjson
import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections

from core.consumers import OwnerConsumer
from loom import access, live
from loom.models import Node

log = logging.getLogger(__name__)

REVOKED_CLOSE = 4403  # not one the ws extension reconnects on, nor loomlive.js
_redis: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
    weakref.WeakKeyDictionary()
)


def presence_redis() -> aioredis.Redis:
    """One pool per event loop (a server has one; its connections belong to it). The
    presence hash is in Redis, not here: every web process sees every page."""
    loop = asyncio.get_running_loop()
    client = _redis.get(loop)
    if client is None:
        client = _redis[loop] = aioredis.Redis.from_url(settings.REDIS_URL)
    return client


# Renderings under way in this process, by cache key (a dedup, not state: the cache
# holds the result for every process).
_rendering: dict[str, asyncio.Future[str]] = {}


def _render_parts(tree_id: int, node_id: int, archived: bool, stamp: float, role: str) -> str:
    from loom.reader_views import live_parts

    close_old_connections()
    try:
        return live_parts(tree_id, node_id, archived, stamp, role)
    finally:
        close_old_connections()


class TreeConsumer(OwnerConsumer):
    async def authorize(self) -> list[str]:
        self.tree_id = int(self.scope["url_route"]["kwargs"]["tree_id"])
        self.role = await database_sync_to_async(access.role_for)(self.user, self.tree_id)
        # A stranger is refused before the socket is accepted (nothing is ever sent).
        return [live.group(self.tree_id)] if access.can_view(self.role) else []

    async def on_accepted(self) -> None:
        self.node: int | None = None
        self.client = ""  # the page's own id: its own changes need no fragment
        self.archived = False  # whether its lists show archived nodes (its session's choice)
        await self.send_json({"kind": "hello", "role": self.role})
        await self._send_presence()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "joined", None):
            try:
                await presence_redis().hdel(live.presence_key(self.tree_id), self.channel_name)
                await self.channel_layer.group_send(
                    live.group(self.tree_id), {"type": "presence.changed"}
                )
            except Exception:  # presence is a courtesy: ages out within PRESENCE_TTL anyway
                log.warning("tree %s: presence not cleared", self.tree_id)
        await super().disconnect(code)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The page says which node it is on: {"here": node id} (also its heartbeat)."""
        if not isinstance(content, dict) or "here" not in content:
            return
        self.client = str(content.get("client") or "")[:64]
        self.archived = bool(content.get("archived"))
        try:
            node = int(content["here"])
        except (TypeError, ValueError):
            return
        if node != self.node:
            in_tree = await database_sync_to_async(
                Node.objects.filter(pk=node, tree_id=self.tree_id).exists
            )()
            if not in_tree:
                return
        moved = node != self.node
        self.node = node
        value = orjson.dumps([self.user.pk, self.user.get_username(), node, time.time()])
        key = live.presence_key(self.tree_id)
        store = presence_redis()
        await store.hset(key, self.channel_name, value)
        await store.expire(key, live.PRESENCE_TTL * 2)
        if moved:
            await self.channel_layer.group_send(
                live.group(self.tree_id), {"type": "presence.changed"}
            )

    async def _send_presence(self) -> None:
        raw = await presence_redis().hgetall(live.presence_key(self.tree_id))
        people = live.present_people(raw, exclude=self.channel_name)
        await self.send_json({"kind": "presence", "people": people})

    async def presence_changed(self, event: dict) -> None:
        if not getattr(self, "revoked", False):
            await self._send_presence()

    async def tree_event(self, event: dict) -> None:
        if getattr(self, "revoked", False):
            return
        message = {"kind": "event", **{k: v for k, v in event.items() if k != "type"}}
        if self.node is not None and event.get("client") != self.client and event.get("stamp"):
            # The parts of the page's node as the change left them, with the event: one
            # rendering for every page on the node (cached), no request per page.
            message["node"] = self.node
            message["html"] = await self._parts(event["stamp"])
        await self.send_json(message)

    async def _parts(self, stamp: float) -> str:
        """From the cache, else rendered once in this process however many of its
        sockets ask at the same moment, in a thread of its own: the server's one thread
        for sync views is busy with the very request that made the change."""
        from loom.reader_views import live_key

        key = live_key(self.tree_id, self.node or 0, self.archived, stamp, self.role)
        html = await sync_to_async(cache.get, thread_sensitive=False)(key)
        if html is not None:
            return html
        task = _rendering.get(key)
        if task is None:
            render = sync_to_async(_render_parts, thread_sensitive=False)
            task = asyncio.ensure_future(
                render(self.tree_id, self.node, self.archived, stamp, self.role)
            )
            _rendering[key] = task
            task.add_done_callback(lambda _t: _rendering.pop(key, None))
        try:
            return await asyncio.shield(task)
        except Exception:  # the page then asks for the parts itself
            log.exception("tree %s: live parts not rendered", self.tree_id)
            return ""

    async def access_changed(self, event: dict) -> None:
        if event.get("user_id") not in (None, self.user.pk):
            return
        role = await database_sync_to_async(access.role_for)(self.user, self.tree_id)
        if not access.can_view(role):
            await self.send_json(
                {"kind": "revoked", "message": "You no longer have access to this tree."}
            )
            # Out of the group first: nothing more of the tree reaches this socket.
            self.revoked = True
            await self.channel_layer.group_discard(live.group(self.tree_id), self.channel_name)
            await self.close(code=REVOKED_CLOSE)
            return
        if role != self.role:
            self.role = role
            await self.send_json({"kind": "role", "role": role})
