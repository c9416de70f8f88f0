"""ws/generations/<id>/: streams one generation's tokens to its owner as htmx
out-of-band fragments (see docs/architecture.md)."""

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError

from completions import lifecycle
from completions.models import Generation
from completions.registry import result_url
from completions.streaming import (
    Coverage,
    Gap,
    choice_fragment,
    final_fragment,
    group_name,
    state_fragment,
    tokens_fragment,
)
from core.consumers import OwnerConsumer

log = logging.getLogger(__name__)

# How often a socket that missed part of a stream re-reads the checkpoint, which the
# worker writes at least every WEFT_CHECKPOINT_INTERVAL_SECONDS while the text grows.
CATCH_UP_POLL_SECONDS = 0.2


def catch_up_patience() -> float:
    """How long to wait for a checkpoint that covers a gap: a few intervals, past
    which checkpoints are failing (the worker retries them) and the stream goes on."""
    return max(2.0, 4 * settings.WEFT_CHECKPOINT_INTERVAL_SECONDS)


class GenerationConsumer(OwnerConsumer):
    async def authorize(self) -> list[str]:
        self.generation_id = int(self.scope["url_route"]["kwargs"]["generation_id"])
        owned = await database_sync_to_async(
            Generation.objects.filter(pk=self.generation_id, owner=self.user).exists
        )()
        return [group_name(self.generation_id)] if owned else []

    async def on_accepted(self) -> None:
        # The socket is in the group already: what it receives from now on may overlap
        # the checkpoint read below, or start after a gap; `coverage` sorts that out.
        self.coverage = Coverage()
        # A page asking about its run is one of the moments a dead worker is noticed.
        generation = await database_sync_to_async(self._load_checked)()
        parts = [
            state_fragment(
                generation.pk, generation.state, generation.error_code, generation.request_id
            )
        ]
        if generation.state == Generation.State.RUNNING:
            # Catch up with what streamed before this socket joined.
            for i, choice in enumerate(generation.choices):
                parts.append(
                    choice_fragment(
                        generation.pk, i, choice.get("text") or "", choice.get("logprobs")
                    )
                )
                self.coverage.reset(i, choice)
        if generation.is_terminal:
            parts.append(
                final_fragment(generation.pk, await database_sync_to_async(result_url)(generation))
            )
        await self.send(text_data="".join(parts))

    def _load_checked(self) -> Generation:
        return lifecycle.check_alive(Generation.objects.get(pk=self.generation_id))

    async def gen_tokens(self, event: dict) -> None:
        parts: list[str] = []
        items: list[list[Any]] = []
        for item in event["items"]:
            part = self.coverage.take(item)
            if isinstance(part, Gap):
                # Never out of order: what came before goes first, then the fresher
                # checkpoint replaces the choice, then the rest is taken against it.
                if items:
                    parts.append(tokens_fragment(self.generation_id, items))
                    items = []
                parts.append(await self._catch_up(part))
                part = self.coverage.take(item)
            if isinstance(part, list):  # after a catch-up, never a Gap again
                items.append(part)
        if items:
            parts.append(tokens_fragment(self.generation_id, items))
        if html := "".join(parts):
            await self.send(text_data=html)

    async def _catch_up(self, gap: Gap) -> str:
        """Wait for a checkpoint that covers `gap` and return the fragments that
        replace the choices it is ahead on. Meanwhile this socket's messages wait in
        its channel, in order (the dispatch is one message at a time); a run that
        ended meanwhile has its whole text in the row."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + catch_up_patience()
        choices: list[dict[str, Any]] = []
        while loop.time() < deadline:
            await asyncio.sleep(CATCH_UP_POLL_SECONDS)
            try:
                generation = await database_sync_to_async(
                    Generation.objects.only("state", "choices").get
                )(pk=self.generation_id)
            except DatabaseError:  # away for a moment, like the worker's checkpoints
                log.warning("generation %s: checkpoint unreadable", self.generation_id)
                continue
            choices = generation.choices
            choice = choices[gap.choice] if gap.choice < len(choices) else {}
            if len(choice.get("text") or "") >= gap.start or generation.is_terminal:
                break
        parts = []
        for i, choice in enumerate(choices):
            if len(choice.get("text") or "") > self.coverage.chars.get(i, 0):
                text, logprobs = choice.get("text") or "", choice.get("logprobs")
                parts.append(choice_fragment(self.generation_id, i, text, logprobs))
                self.coverage.reset(i, choice)
        if self.coverage.chars.get(gap.choice, 0) < gap.start:
            # Gave up waiting (checkpoints failing): go on past the hole rather than
            # stop showing the stream; the final result replaces the text anyway.
            self.coverage.chars[gap.choice] = gap.start
        return "".join(parts)

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
