"""Every WebSocket route. Each consumer extends core.consumers.OwnerConsumer,
which refuses anonymous sockets and objects that belong to someone else."""

from django.urls import path

from batch.consumers import BatchConsumer
from completions.consumers import GenerationConsumer
from core.consumers import PingConsumer
from loom.consumers import TreeConsumer

websocket_urlpatterns = [
    path("ws/ping/", PingConsumer.as_asgi()),
    path("ws/generations/<int:generation_id>/", GenerationConsumer.as_asgi()),
    path("ws/batches/<int:batch_id>/", BatchConsumer.as_asgi()),
    path("ws/loom/<int:tree_id>/", TreeConsumer.as_asgi()),
]
