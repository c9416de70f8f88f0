"""A WebSocket client for generation pages, parsing the consumer's OOB fragments."""

import asyncio
import html
import re

import websockets

# The body is plain text, or token chips (core/tokens.py) when the run has logprobs.
_BODY = r'((?:<span class="tok[^>]*>[^<]*</span>)+|[^<]*)</span>'
CHIP = re.compile(r'<span class="tok[^>]*>([^<]*)</span>')
FRAGMENT = re.compile(
    r'<span hx-swap-oob="(innerHTML|beforeend):#gen-\d+-choice-(\d+)">' + _BODY, re.S
)


def pieces(body: str) -> list[str]:
    """A fragment's text: one piece per chip, or the plain text as one piece."""
    if body.startswith('<span class="tok'):
        return [html.unescape(t) for t in CHIP.findall(body)]
    return [html.unescape(body)]


class Watcher:
    """Collects tokens per choice as they arrive — `tokens`: the appends since the last
    replace, `snapshot`: that replace; `final` is set by the terminal fragment."""

    def __init__(self) -> None:
        self.tokens: dict[int, list[str]] = {}
        self.snapshot: dict[int, str] = {}
        self.messages: list[str] = []
        self.final = False

    def feed(self, message: str) -> None:
        self.messages.append(message)
        # In order, as the page applies them: a replace (a checkpoint the consumer sends
        # on joining, or to mend a hole) stands for everything before it; the appends
        # after it follow it. (Read apart, the appends from before a mend were counted
        # again after it: the fault test's "repeated tokens".)
        for swap, index, body in FRAGMENT.findall(message):
            if swap == "innerHTML":
                self.snapshot[int(index)] = "".join(pieces(body))
                self.tokens[int(index)] = []
            else:
                self.tokens.setdefault(int(index), []).extend(pieces(body))
        if "-final" in message:
            self.final = True

    def text(self, index: int) -> str:
        return self.snapshot.get(index, "") + "".join(self.tokens.get(index, []))

    def count(self) -> int:
        return sum(len(v) for v in self.tokens.values())


class Page:
    """The choice targets as the browser ends up with them: each message's fragments
    applied in order, a replace (innerHTML) or an append (beforeend)."""

    def __init__(self) -> None:
        self.choices: dict[int, list[str]] = {}
        self.final = False

    def feed(self, message: str) -> None:
        for swap, index, body in FRAGMENT.findall(message):
            target = self.choices.setdefault(int(index), [])
            if swap == "innerHTML":
                target.clear()
            target.extend(p for p in pieces(body) if p)
        if "-final" in message:
            self.final = True

    def text(self, index: int) -> str:
        return "".join(self.choices.get(index, []))


async def watch(
    base_url: str,
    cookie: str,
    generation_id: int,
    watcher: Watcher,
    *,
    until_final: bool = True,
    timeout: float = 60,
    stop=None,
) -> None:
    """Feed `watcher` until the final fragment (or, with until_final=False, until
    `stop` — a threading.Event — is set or the timeout passes)."""
    url = base_url.replace("http://", "ws://") + f"/ws/generations/{generation_id}/"
    headers = {"Cookie": f"sessionid={cookie}", "Origin": base_url}
    async with websockets.connect(url, additional_headers=headers) as ws:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (until_final and watcher.final):
            if stop is not None and stop.is_set():
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                if until_final:
                    raise TimeoutError("no final fragment")
                return
            try:
                watcher.feed(await asyncio.wait_for(ws.recv(), min(remaining, 0.2)))
            except TimeoutError:
                continue
