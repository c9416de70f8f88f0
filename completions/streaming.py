"""Live updates: the Channels group per generation, an ordered non-blocking publisher
for the worker, what one socket's page already has of each choice (Coverage), and the
htmx out-of-band fragments the consumer sends.

Every model-written string passes through django.utils.html.escape (via format_html
or escape) here, at render time; nothing is ever marked safe before escaping.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.template.loader import render_to_string
from django.utils.html import format_html

from completions.models import Generation
from core.tokens import (
    Chip,
    LiveChips,
    chip_dicts,
    chips_for,
    chips_from_dicts,
    chips_html,
)

log = logging.getLogger(__name__)


def state_label(state: str) -> str:
    """The one table of state labels: Generation.State's."""
    try:
        return str(Generation.State(state).label)
    except ValueError:
        return state


def group_name(generation_id: int) -> str:
    return f"generation-{generation_id}"


def state_message(generation: Any) -> dict[str, Any]:
    return {
        "type": "gen.state",
        "state": generation.state,
        "error_code": generation.error_code,
        "request_id": generation.request_id,
    }


def publish_now(generation_id: int, message: dict[str, Any]) -> None:
    """One blocking group_send, for code outside the streaming loop."""
    try:
        async_to_sync(get_channel_layer().group_send)(group_name(generation_id), message)
    except Exception:  # a page missing one update re-reads the result; never fail a run for it
        log.exception("generation %s: could not publish %s", generation_id, message.get("type"))


# --- the worker's publisher -------------------------------------------------------

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _publisher_loop() -> asyncio.AbstractEventLoop:
    """One event loop thread per worker process, so the channel layer keeps one
    connection pool and the streaming thread never waits for Redis."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="weft-publisher", daemon=True).start()
            _loop = loop
        return _loop


def publish_soon(group: str, message: dict[str, Any]) -> None:
    """A group_send that does not wait, on the process's publisher loop (one Redis
    connection pool): for bookkeeping outside a stream, e.g. a batch's progress."""

    def report(future: Future) -> None:
        if future.exception() is not None:
            log.error("publish to %s failed: %r", group, future.exception())

    coroutine = get_channel_layer().group_send(group, message)
    asyncio.run_coroutine_threadsafe(coroutine, _publisher_loop()).add_done_callback(report)


_CLOSE = object()


class GroupPublisher:
    """Ordered publishing to one generation's group from a sync thread. `token()`
    never blocks; tokens that pile up while a send is in flight go out together in
    one message (same order), so a slow Redis costs batching, not throughput.

    Each item carries where its text ends in its choice's whole text (Python str
    length, the checkpoint's unit), so a socket that joins mid-run can tell what its
    catch-up from the checkpoint already holds (completions/consumers.py)."""

    def __init__(self, generation_id: int) -> None:
        self.group = group_name(generation_id)
        self.loop = _publisher_loop()
        self.pending: deque[Any] = deque()
        self.lock = threading.Lock()
        self.woken = False
        self.wake_event: asyncio.Event | None = None
        self.done: Future = asyncio.run_coroutine_threadsafe(self._drain(), self.loop)
        # Per choice, when the stream carries logprobs: tokens waiting to align with text.
        self.live: dict[int, LiveChips] = {}
        # Per choice: characters published so far (held-back text not yet counted).
        self.ends: dict[int, int] = {}

    def _put(self, item: Any) -> None:
        self.pending.append(item)
        # Wake the loop only when the drain task sleeps: while it is busy sending, it
        # picks new items up by itself, and a busy stream costs no extra wake-ups.
        with self.lock:
            if self.woken:
                return
            self.woken = True
        self.loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if self.wake_event is not None:
            self.wake_event.set()

    def token(self, index: int, text: str, logprobs: dict[str, Any] | None = None) -> None:
        """Text of one chunk; with its logprobs the page gets coloured token chips
        (the same markup as the saved result's), else plain text."""
        if not logprobs and index not in self.live:
            if text:
                end = self.ends[index] = self.ends.get(index, 0) + len(text)
                self._put((index, text, None, end))
            return
        self._put_chips(index, self.live.setdefault(index, LiveChips()).feed(text, logprobs))

    def _put_chips(self, index: int, chips: list[Chip]) -> None:
        if chips:
            # In-text chips join to exactly the choice's text (core.tokens), so their
            # lengths add up to the offset; the others (a stop token) stand for none.
            end = self.ends.get(index, 0) + sum(len(c.text) for c in chips if c.in_text)
            self.ends[index] = end
            self._put((index, None, chip_dicts(chips), end))

    def send(self, message: dict[str, Any]) -> None:
        self._put(message)

    def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued, then stop."""
        for index, live in self.live.items():
            self._put_chips(index, live.flush())
        self._put(_CLOSE)
        try:
            self.done.result(timeout)
        except Exception:
            log.exception("publisher for %s did not flush", self.group)

    def _take(self) -> list[Any]:
        batch = []
        while self.pending:
            batch.append(self.pending.popleft())
        return batch

    async def _drain(self) -> None:
        layer = get_channel_layer()
        self.wake_event = asyncio.Event()
        while True:
            with self.lock:
                batch = self._take()
                if not batch:
                    self.woken = False
                    self.wake_event.clear()
            if not batch:
                await self.wake_event.wait()
                continue
            tokens: list[list[Any]] = []
            for item in batch:
                if isinstance(item, tuple):
                    tokens.append(list(item))
                    continue
                if tokens:
                    await self._send(layer, {"type": "gen.tokens", "items": tokens})
                    tokens = []
                if item is _CLOSE:
                    return
                await self._send(layer, item)
            if tokens:
                await self._send(layer, {"type": "gen.tokens", "items": tokens})

    async def _send(self, layer: Any, message: dict[str, Any]) -> None:
        try:
            await layer.group_send(self.group, message)
        except Exception:
            log.exception("publish to %s failed", self.group)


# --- what a page already has --------------------------------------------------------


class Gap(NamedTuple):
    """An item that starts past what the page has of its choice: the text between was
    published before the socket joined (after the checkpoint it sent) or lost."""

    choice: int
    start: int


@dataclass
class Hole:
    """A gap the page shows for now: the stream goes on after it, and once a checkpoint
    covers `start` the choice is replaced by that checkpoint and `sent` (what went out
    since the gap) is taken again against it."""

    start: int
    opened: float
    sent: list[list[Any]] = field(default_factory=list)


class Coverage:
    """Per choice, how much of its text one socket's page already has, so that a
    socket joining mid-run shows every character once and in order: its catch-up
    sent the checkpoint (`reset`), and the stream's items then overlap it (the
    checkpoint holds text the publisher had not sent yet) or leave a gap after it
    (published between the checkpoint's write and the socket's join), which the
    consumer shows as a Hole until a later checkpoint mends it."""

    def __init__(self) -> None:
        self.chars: dict[int, int] = {}
        # Tokens of the checkpoint last sent for the choice: tells whether a chip that
        # stands for no text (a stop token) at the covered offset is already shown.
        self.tokens: dict[int, int] = {}

    def jump(self, gap: Gap) -> None:
        """Go on from the gap's start (the page shows a hole until it is mended)."""
        self.chars[gap.choice] = gap.start

    def reset(self, index: int, choice: dict[str, Any]) -> None:
        """The page was sent `choice` (a checkpoint's) in full."""
        self.chars[index] = len(choice.get("text") or "")
        logprobs = choice.get("logprobs")
        tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
        self.tokens[index] = len(tokens) if isinstance(tokens, list) else 0

    def take(self, item: list[Any]) -> list[Any] | Gap | None:
        """What of `item` the page lacks: the item itself (the usual case, kept cheap:
        it runs for every token of every stream), its uncovered tail, None when the
        page has it all, or a Gap (nothing is taken then)."""
        if len(item) < 4:
            return item  # an older worker's item, without an offset: sent as before
        index, text, chips, end = item
        covered = self.chars.get(index, 0)
        if text is not None:
            start = end - len(text)
            if start == covered:
                self.chars[index] = end
                return item
            if start > covered:
                return Gap(index, start)
            if end <= covered:
                return None
            self.chars[index] = end
            return [index, text[covered - start :], None, end]
        length = sum(len(c["text"]) for c in chips if c["in_text"])
        start = end - length
        if start > covered:
            return Gap(index, start)
        if start == covered and length:
            self.chars[index] = end
            return item
        return self._chips_tail(index, chips, start, covered, end)

    def _chips_tail(
        self, index: int, chips: list[dict[str, Any]], start: int, covered: int, end: int
    ) -> list[Any] | None:
        shown_tokens = self.tokens.get(index, 0)
        kept = []
        pos = start
        for chip in chips:
            chip_end = pos + (len(chip["text"]) if chip["in_text"] else 0)
            if chip_end > covered:
                if pos >= covered:
                    kept.append(chip)
                else:
                    # Cut by the covered offset (the checkpoint's chips split the text
                    # differently): its uncovered tail goes out as plain text, escaped
                    # like every chip; the final result shows the real chip.
                    kept.append({**_PLAIN_CHIP, "text": chip["text"][covered - pos :]})
            elif chip_end == covered == pos and not (
                chip["index"] is not None and chip["index"] < shown_tokens
            ):
                kept.append(chip)  # a chip for no text the checkpoint did not hold
            pos = chip_end
        self.chars[index] = max(covered, end)
        return [index, None, kept, end] if kept else None


_PLAIN_CHIP: dict[str, Any] = {
    "text": "",
    "logprob": None,
    "in_text": True,
    "index": None,
    "alternatives": [],
}


# --- htmx fragments ---------------------------------------------------------------


def tokens_fragment(generation_id: int, items: list[list[Any]]) -> str:
    """Items are [index, text, None, end] (plain text) or [index, None, chips, end]
    (core.tokens chips as dicts), `end` being where the item's text ends in the
    choice's text. (An older worker's items, [index, text] and [index, None, chips],
    render the same.)"""
    return "".join(
        format_html(
            '<span hx-swap-oob="beforeend:#gen-{}-choice-{}">{}</span>',
            generation_id,
            int(item[0]),
            item[1] if item[1] is not None else chips_html(chips_from_dicts(item[2])),
        )
        for item in items
    )


def choice_fragment(
    generation_id: int, index: int, text: str, logprobs: dict[str, Any] | None = None
) -> str:
    """Replace a choice's streamed text (used when a socket connects mid-run)."""
    chips = chips_for(text, logprobs)
    return format_html(
        '<span hx-swap-oob="innerHTML:#gen-{}-choice-{}">{}</span>',
        generation_id,
        index,
        text if chips is None else chips_html(chips),
    )


def state_fragment(
    generation_id: int, state: str, error_code: str = "", request_id: str = ""
) -> str:
    return render_to_string(
        "completions/_live.html#state",
        {
            "generation_id": generation_id,
            "state": state,
            "label": state_label(state),
            "error_code": error_code,
            "request_id": request_id
            if state in (Generation.State.FAILED, Generation.State.REFUSED)
            else "",
            "oob": True,
        },
    )


def final_fragment(generation_id: int, result_url: str) -> str:
    return format_html(
        '<div id="gen-{id}-final" hx-swap-oob="true" hx-get="{url}" hx-trigger="load" '
        'hx-target="#gen-{id}-result" hx-swap="outerHTML"></div>',
        id=generation_id,
        url=result_url,
    )
