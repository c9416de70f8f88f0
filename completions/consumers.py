"""ws/generations/<id>/: streams one generation's tokens to its owner as htmx
out-of-band fragments (see docs/architecture.md). Whoever else may watch it (a Loom
tree's members) is checked again whenever an access.changed reaches its group: a
watcher who lost access is told and the socket closes mid-stream."""

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError
from django.utils.html import format_html

from completions import lifecycle
from completions.models import Generation
from completions.registry import may_watch, result_url
from completions.streaming import (
    Coverage,
    Gap,
    Hole,
    choice_fragment,
    final_fragment,
    group_name,
    state_fragment,
    tokens_fragment,
)
from core.consumers import OwnerConsumer

log = logging.getLogger(__name__)

# How often a socket whose page shows a hole re-reads the checkpoint, which the worker
# writes at least every WEFT_CHECKPOINT_INTERVAL_SECONDS while the text grows.
MEND_POLL_SECONDS = 0.2
LOST_CLOSE = 4403  # not one the ws extension reconnects on


def mend_patience() -> float:
    """How long a hole waits for a checkpoint that covers it: a few intervals, past
    which checkpoints are failing (the worker retries them); the final result then
    mends it."""
    return max(2.0, 4 * settings.WEFT_CHECKPOINT_INTERVAL_SECONDS)


class GenerationConsumer(OwnerConsumer):
    async def authorize(self) -> list[str]:
        self.generation_id = int(self.scope["url_route"]["kwargs"]["generation_id"])
        generation = await database_sync_to_async(
            Generation.objects.pages().filter(pk=self.generation_id).first
        )()
        allowed = generation is not None and await database_sync_to_async(may_watch)(
            self.user, generation
        )
        return [group_name(self.generation_id)] if allowed else []

    async def notice(self, message: str) -> None:
        """In the run's state badge, where the page shows how the run is doing."""
        await self.send(
            text_data=format_html(
                '<span id="gen-{}-state" class="gen-state state-closed" hx-swap-oob="true" '
                'role="alert">{}</span>',
                self.generation_id,
                message,
            )
        )

    async def access_changed(self, event: dict) -> None:
        """Someone's access to what this run grows changed (loom.live.access_changed)."""
        if getattr(self, "ended", False) or event.get("user_id") not in (None, self.user.pk):
            return
        generation = await database_sync_to_async(
            Generation.objects.filter(pk=self.generation_id).first
        )()
        allowed = generation is not None and await database_sync_to_async(may_watch)(
            self.user, generation
        )
        if not allowed:
            await self.end("You no longer have access to this run.", LOST_CLOSE)

    async def on_accepted(self) -> None:
        # The socket is in the group already: what it receives from now on may overlap
        # the checkpoint read below, or start after a gap; `coverage` sorts that out.
        self.coverage = Coverage()
        self.holes: dict[int, Hole] = {}
        self.next_mend = 0.0
        # A page asking about its run is one of the moments a dead worker is noticed.
        generation = await database_sync_to_async(self._load_checked)()
        parts = [
            state_fragment(
                generation.pk, generation.state, generation.error_code, generation.request_id
            )
        ]
        if generation.state == Generation.State.RUNNING:
            # Catch up with what streamed before this socket joined.
            parts += self._replace(generation.choices, range(len(generation.choices)))
        if generation.is_terminal:
            parts.append(
                final_fragment(generation.pk, await database_sync_to_async(result_url)(generation))
            )
        await self.send(text_data="".join(parts))

    def _load_checked(self) -> Generation:
        return lifecycle.check_alive(Generation.objects.get(pk=self.generation_id))

    async def gen_tokens(self, event: dict) -> None:
        if getattr(self, "ended", False):
            return
        items: list[list[Any]] = []
        for item in event["items"]:
            part = self.coverage.take(item)
            if isinstance(part, Gap):
                # The text before it went out before this socket joined (or was lost).
                # Rather than hold the stream back until a checkpoint holds that text
                # (a run that just started would show nothing for up to an interval),
                # the page shows a hole for now, mended below.
                self._open_hole(part)
                part = self.coverage.take(item)
            if isinstance(part, list):
                items.append(part)
                if self.holes and part[0] in self.holes:
                    self.holes[part[0]].sent.append(part)
        html = tokens_fragment(self.generation_id, items) if items else ""
        if self.holes and asyncio.get_running_loop().time() >= self.next_mend:
            html += await self._mend()
        if html:
            await self.send(text_data=html)

    def _open_hole(self, gap: Gap) -> None:
        now = asyncio.get_running_loop().time()
        hole = self.holes.get(gap.choice)
        if hole is None:
            if not self.holes:
                self.next_mend = now + MEND_POLL_SECONDS
            self.holes[gap.choice] = Hole(gap.start, now)
        else:
            hole.start = gap.start  # another gap: the checkpoint must reach this one
        self.coverage.jump(gap)

    async def _mend(self) -> str:
        """Replace each choice with a hole by a checkpoint that covers it, followed by
        what went out since the hole, taken again against that checkpoint."""
        loop = asyncio.get_running_loop()
        self.next_mend = loop.time() + MEND_POLL_SECONDS
        try:
            generation = await database_sync_to_async(
                Generation.objects.only("state", "choices").get
            )(pk=self.generation_id)
        except (DatabaseError, Generation.DoesNotExist):
            # Away for a moment, like the worker's checkpoints: look again next time.
            log.warning("generation %s: checkpoint unreadable", self.generation_id)
            choices = []
        else:
            choices = generation.choices
        parts = []
        for index, hole in list(self.holes.items()):
            choice = choices[index] if index < len(choices) else {}
            if len(choice.get("text") or "") >= hole.start:
                del self.holes[index]
                parts += self._replace(choices, [index])
                again = [p for p in map(self.coverage.take, hole.sent) if isinstance(p, list)]
                if again:
                    parts.append(tokens_fragment(self.generation_id, again))
            elif loop.time() - hole.opened > mend_patience():
                log.warning("generation %s: no checkpoint covers a gap", self.generation_id)
                del self.holes[index]  # the final result mends it
        return "".join(parts)

    def _replace(self, choices: list[dict[str, Any]], indexes: Any) -> list[str]:
        """Fragments that replace these choices with `choices`' (a checkpoint's)."""
        parts = []
        for i in indexes:
            choice = choices[i]
            text, logprobs = choice.get("text") or "", choice.get("logprobs")
            parts.append(choice_fragment(self.generation_id, i, text, logprobs))
            self.coverage.reset(i, choice)
        return parts

    async def gen_state(self, event: dict) -> None:
        if getattr(self, "ended", False):
            return
        html = state_fragment(
            self.generation_id,
            event["state"],
            event.get("error_code", ""),
            event.get("request_id", ""),
        )
        if event["state"] in Generation.TERMINAL:
            generation = await database_sync_to_async(Generation.objects.get)(pk=self.generation_id)
            # The saved text mends what is still a hole, so the live text is whole when
            # the stream ends (the final fragment then loads the result).
            holes = [i for i in self.holes if i < len(generation.choices)]
            html += "".join(self._replace(generation.choices, holes))
            self.holes.clear()
            html += final_fragment(
                self.generation_id, await database_sync_to_async(result_url)(generation)
            )
        await self.send(text_data=html)
