"""The WebSocket base every Weft consumer extends."""

import logging

from channels.generic.websocket import AsyncJsonWebsocketConsumer

log = logging.getLogger(__name__)


class OwnerConsumer(AsyncJsonWebsocketConsumer):
    """Refuses anonymous sockets, then asks the subclass whether this user may
    watch the object named in the URL; a refused socket is closed before it is
    accepted (the browser sees HTTP 403), so nothing is ever sent to it."""

    groups_to_join: list[str] = []

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        if self.user is None or not self.user.is_authenticated:
            await self.close()
            return
        groups = await self.authorize()
        if not groups:
            await self.close()
            return
        self.joined = list(groups)
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        await self.on_accepted()

    async def send(self, text_data=None, bytes_data=None, close=False) -> None:
        """A group message can arrive while the browser is closing the socket: the
        handler reads the database, and by the time it sends, the server has no socket
        left (uvicorn raises RuntimeError; other servers an OSError). Nobody is there
        to read it, so it is dropped instead of logged as a crash of the consumer."""
        try:
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
        except (RuntimeError, OSError) as exc:
            log.debug("%s: socket already closed, message dropped (%s)", type(self).__name__, exc)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def authorize(self) -> list[str]:
        """Return the channel-layer groups to join, or [] to refuse."""
        raise NotImplementedError

    async def on_accepted(self) -> None:
        """Hook for sending an initial state after the socket is accepted."""


class PingConsumer(OwnerConsumer):
    """A per-user socket the layout uses to show whether live updates work."""

    async def authorize(self) -> list[str]:
        return [ping_group(self.user.pk)]

    async def ping_message(self, event: dict) -> None:
        await self.send(text_data=event["text"])


def ping_group(user_id: int) -> str:
    return f"ping-{user_id}"
