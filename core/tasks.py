from asgiref.sync import async_to_sync
from celery import shared_task
from channels.layers import get_channel_layer

from core.consumers import ping_group


@shared_task
def ping_burst(user_id: int, count: int) -> None:
    """Sends `count` numbered messages to a user's ping sockets: the smallest
    proof that worker -> channel layer -> WebSocket works and keeps order."""
    layer = get_channel_layer()
    send = async_to_sync(layer.group_send)
    for i in range(count):
        send(ping_group(user_id), {"type": "ping.message", "text": str(i)})
