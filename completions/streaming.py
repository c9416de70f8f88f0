"""Live updates: the Channels group per generation, an ordered non-blocking publisher
for the worker, and the htmx out-of-band fragments the consumer sends.

Every model-written string passes through django.utils.html.escape (via format_html
or escape) here, at render time; nothing is ever marked safe before escaping.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.template.loader import render_to_string
from django.utils.html import format_html

from completions.models import Generation
from core.tokens import LiveChips, chip_dicts, chips_for, chips_from_dicts, chips_html

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
    one message (same order), so a slow Redis costs batching, not throughput."""

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
                self._put((index, text))
            return
        chips = self.live.setdefault(index, LiveChips()).feed(text, logprobs)
        if chips:
            self._put((index, None, chip_dicts(chips)))

    def send(self, message: dict[str, Any]) -> None:
        self._put(message)

    def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued, then stop."""
        for index, live in self.live.items():
            if chips := live.flush():
                self._put((index, None, chip_dicts(chips)))
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


# --- htmx fragments ---------------------------------------------------------------


def tokens_fragment(generation_id: int, items: list[list[Any]]) -> str:
    """Items are [index, text] (plain text) or [index, None, chips] (core.tokens chips)."""
    return "".join(
        format_html(
            '<span hx-swap-oob="beforeend:#gen-{}-choice-{}">{}</span>',
            generation_id,
            int(item[0]),
            item[1] if len(item) < 3 else chips_html(chips_from_dicts(item[2])),
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
