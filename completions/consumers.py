"""ws/generations/<id>/: streams one generation's tokens to its owner as htmx
out-of-band fragments (see docs/architecture.md)."""

from channels.db import database_sync_to_async

from completions import lifecycle
from completions.models import Generation
from completions.registry import result_url
from completions.streaming import (
    choice_fragment,
    final_fragment,
    group_name,
    state_fragment,
    tokens_fragment,
)
from core.consumers import OwnerConsumer


class GenerationConsumer(OwnerConsumer):
    async def authorize(self) -> list[str]:
        self.generation_id = int(self.scope["url_route"]["kwargs"]["generation_id"])
        owned = await database_sync_to_async(
            Generation.objects.filter(pk=self.generation_id, owner=self.user).exists
        )()
        return [group_name(self.generation_id)] if owned else []

    async def on_accepted(self) -> None:
        # A page asking about its run is one of the moments a dead worker is noticed.
        generation = await database_sync_to_async(self._load_checked)()
        parts = [
            state_fragment(
                generation.pk, generation.state, generation.error_code, generation.request_id
            )
        ]
        if generation.state == Generation.State.RUNNING:
            # Catch up with what streamed before this socket joined.
            parts += [
                choice_fragment(generation.pk, i, c.get("text", ""), c.get("logprobs"))
                for i, c in enumerate(generation.choices)
            ]
        if generation.is_terminal:
            parts.append(
                final_fragment(generation.pk, await database_sync_to_async(result_url)(generation))
            )
        await self.send(text_data="".join(parts))

    def _load_checked(self) -> Generation:
        return lifecycle.check_alive(Generation.objects.get(pk=self.generation_id))

    async def gen_tokens(self, event: dict) -> None:
        await self.send(text_data=tokens_fragment(self.generation_id, event["items"]))

    async def gen_state(self, event: dict) -> None:
        html = state_fragment(
            self.generation_id,
            event["state"],
            event.get("error_code", ""),
            event.get("request_id", ""),
        )
        if event["state"] in Generation.TERMINAL:
            generation = await database_sync_to_async(Generation.objects.get)(pk=self.generation_id)
            html += final_fragment(
                self.generation_id, await database_sync_to_async(result_url)(generation)
            )
        await self.send(text_data=html)
