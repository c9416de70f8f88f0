"""ws/batches/<id>/: a batch's progress, to its owner, as an htmx out-of-band
fragment each time a prompt finishes (batch.feeding.publish)."""

from channels.db import database_sync_to_async
from django.template.loader import render_to_string

from batch.feeding import group_name
from batch.models import Batch
from core.consumers import OwnerConsumer


class BatchConsumer(OwnerConsumer):
    async def authorize(self) -> list[str]:
        self.batch_id = int(self.scope["url_route"]["kwargs"]["batch_id"])
        owned = await database_sync_to_async(
            Batch.objects.filter(pk=self.batch_id, owner=self.user).exists
        )()
        return [group_name(self.batch_id)] if owned else []

    async def on_accepted(self) -> None:
        await self.send(text_data=await database_sync_to_async(self._fragment)())

    async def batch_progress(self, event: dict) -> None:
        await self.send(text_data=await database_sync_to_async(self._fragment)())

    def _fragment(self) -> str:
        batch = Batch.objects.filter(pk=self.batch_id).first()
        if batch is None:  # deleted meanwhile
            return ""
        context = {"batch": batch, "progress": batch.progress(), "oob": True}
        return render_to_string("batch/detail.html#progress", context) + render_to_string(
            "batch/detail.html#controls", context
        )
