"""ws/loom/<tree id>/: a tree's open page, live (loom/live.py). The socket forwards
the tree's events as JSON (ids and usernames only; the page fetches the fragments),
keeps the page's presence, and re-checks the user's role when it changes: revoked,
the page is told and the socket closes; another role, the page re-reads its controls.

Presence: a page's node switches are coalesced (at most one announcement per
WEFT_PRESENCE_INTERVAL_SECONDS per socket) and announced to the tree's other sockets as
one entry — a diff — which each applies to its own copy of the tree's presence (read
whole from Redis once when it opens, and again at each lease renewal, which drops the
entries of a web process that died). No page's own id (the X-Weft-Client it sends) ever
leaves the server: each socket is told which events are its own."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections

from core.consumers import Cap, OwnerConsumer, socket_redis
from loom import access, live
from loom.models import Node

log = logging.getLogger(__name__)

REVOKED_CLOSE = 4403  # not one the ws extension reconnects on, nor loomlive.js
presence_redis = socket_redis

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

    def more_caps(self) -> list[Cap]:
        tree = self.tree_id
        return [
            Cap(f"weft:ws:tree:{tree}", settings.WEFT_WS_PER_TREE, " on this tree"),
            Cap(
                f"weft:ws:tree:{tree}:user:{self.user.pk}",
                settings.WEFT_WS_PER_USER_TREE,
                " of this tree",
            ),
        ]

    async def notice(self, message: str) -> None:
        if message:
            await self.send_json({"kind": "closed", "message": message})

    async def on_accepted(self) -> None:
        self.node: int | None = None
        self.wanted: int | None = None  # the node the page last said, not yet announced
        self.client = ""  # the page's own id: its own changes need no fragment
        self.archived = False  # whether its lists show archived nodes (its session's choice)
        self.present: dict[Any, Any] = {}  # the tree's presence hash, kept by diffs
        self.shown: list | None = None  # the people this page was last told of
        self.announcing: asyncio.Future | None = None
        self.announced = 0.0
        await self.send_json({"kind": "hello", "role": self.role})
        await self._resync()

    async def disconnect(self, code: int) -> None:
        announcing = getattr(self, "announcing", None)
        if announcing is not None:
            announcing.cancel()
        # Also after the socket was ended (revoked, signed out): its entry goes now.
        if getattr(self, "node", None) is not None:
            try:
                await presence_redis().hdel(live.presence_key(self.tree_id), self.channel_name)
                await self._announce(None)
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
            self.wanted = int(content["here"])
        except (TypeError, ValueError):
            return
        if self.announcing is None or self.announcing.done():
            loop = asyncio.get_running_loop()
            wait = self.announced + settings.WEFT_PRESENCE_INTERVAL_SECONDS - loop.time()
            self.announcing = asyncio.ensure_future(self._settle(max(0.0, wait)))

    async def _settle(self, wait: float) -> None:
        """After `wait`, take the node the page said last (however many it said
        meanwhile): one node check, one write, and one announcement if it moved."""
        try:
            if wait:
                await asyncio.sleep(wait)
            await self._take_wanted()
        except asyncio.CancelledError:
            raise
        except Exception:  # presence is a courtesy; the next word from the page retries
            log.warning("tree %s: presence not updated", self.tree_id)

    async def _take_wanted(self) -> None:
        self.announced = asyncio.get_running_loop().time()
        node, self.wanted = self.wanted, None
        if node is None or getattr(self, "ended", False):
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
            await self._announce(value)

    async def _announce(self, value: bytes | None) -> None:
        await self.channel_layer.group_send(
            live.group(self.tree_id),
            {
                "type": "presence.diff",
                "socket": self.channel_name,
                "entry": value.decode() if value is not None else None,
            },
        )

    async def presence_diff(self, event: dict) -> None:
        if getattr(self, "ended", False) or event.get("socket") == self.channel_name:
            return
        if event.get("entry") is None:
            self.present.pop(event.get("socket"), None)
        else:
            self.present[event.get("socket")] = event["entry"]
        await self._send_presence()

    async def _resync(self) -> None:
        self.present = await presence_redis().hgetall(live.presence_key(self.tree_id))
        self.present = {
            (k.decode() if isinstance(k, bytes) else k): v for k, v in self.present.items()
        }
        await self._send_presence()

    async def on_heartbeat(self) -> None:
        await self._resync()

    async def presence_changed(self, event: dict) -> None:
        """A web process of the version before diffs; read the hash whole."""
        if not getattr(self, "ended", False):
            await self._resync()

    async def _send_presence(self) -> None:
        people = live.present_people(self.present, exclude=self.channel_name)
        if people != self.shown:
            self.shown = people
            await self.send_json({"kind": "presence", "people": people})

    async def tree_event(self, event: dict) -> None:
        if getattr(self, "ended", False):
            return
        # The page's own change (its user, its id): already shown there. The id stays
        # here: a page that learnt another's could make it ignore its own changes.
        own = bool(self.client) and (event.get("by"), event.get("client")) == (
            self.user.pk,
            self.client,
        )
        message = {"kind": "event", "own": own}
        message |= {k: v for k, v in event.items() if k not in ("type", "client")}
        if self.node is not None and not own and event.get("stamp"):
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

        node = self.node or 0  # no node has pk 0: the same "not found" as None
        key = live_key(self.tree_id, node, self.archived, stamp, self.role)
        html = await sync_to_async(cache.get, thread_sensitive=False)(key)
        if html is not None:
            return html
        task = _rendering.get(key)
        if task is None:
            render = sync_to_async(_render_parts, thread_sensitive=False)
            task = asyncio.ensure_future(
                render(self.tree_id, node, self.archived, stamp, self.role)
            )
            _rendering[key] = task
            task.add_done_callback(lambda _t: _rendering.pop(key, None))
        try:
            return await asyncio.shield(task)
        except Exception:  # the page then asks for the parts itself
            log.exception("tree %s: live parts not rendered", self.tree_id)
            return ""

    async def access_changed(self, event: dict) -> None:
        if getattr(self, "ended", False) or event.get("user_id") not in (None, self.user.pk):
            return
        role = await database_sync_to_async(access.role_for)(self.user, self.tree_id)
        if not access.can_view(role):
            await self.send_json(
                {"kind": "revoked", "message": "You no longer have access to this tree."}
            )
            # Out of the group first: nothing more of the tree reaches this socket.
            await self.end("", REVOKED_CLOSE)
            return
        if role != self.role:
            self.role = role
            await self.send_json({"kind": "role", "role": role})
