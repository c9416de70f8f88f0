"""The socket's per-item cost of knowing what a page already has (issue 14).

    .venv/bin/python bench/consumer_coverage.py

Every gen.tokens item goes through `Coverage.take` (completions/streaming.py) before
the consumer renders it with `tokens_fragment`. In one process, side by side, this
times rendering alone against take + rendering, per item, for plain-text items and
for token-chip items (logprobs) as the real GroupPublisher makes them. Printed: both
per-item times, their ratio and `take` alone, with `uptime`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from completions.streaming import Coverage, GroupPublisher, tokens_fragment  # noqa: E402

WORDS = [" the", " cat", " sat", " on", " a", " mat", "."] * 40


class Captured(GroupPublisher):
    """The publisher's items as it would queue them, without a channel layer."""

    def __init__(self) -> None:
        self.live, self.ends, self.items = {}, {}, []

    def _put(self, item) -> None:
        self.items.append(list(item))


def items(with_logprobs: bool) -> list[list]:
    publisher = Captured()
    for word in WORDS:
        logprobs = {"tokens": [word], "token_logprobs": [-0.3], "top_logprobs": [{word: -0.3}]}
        publisher.token(0, word, logprobs if with_logprobs else None)
    for index, live in publisher.live.items():
        publisher._put_chips(index, live.flush())
    return publisher.items


def per_item(fn, n: int) -> float:
    return min(timeit.repeat(fn, number=20, repeat=7)) / (20 * n)


def main() -> None:
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for name, batch in (("plain", items(False)), ("chips", items(True))):
        alone = per_item(lambda b=batch: [tokens_fragment(1, [i]) for i in b], len(batch))

        def taken(b=batch):
            coverage = Coverage()
            return [tokens_fragment(1, [coverage.take(i)]) for i in b]

        both = per_item(taken, len(batch))
        take = per_item(lambda b=batch: list(map(Coverage().take, b)), len(batch))
        print(
            f"{name}: render {alone * 1e6:.2f} us/item, take + render {both * 1e6:.2f} us/item "
            f"(ratio {both / alone:.3f}); take alone {take * 1e6:.3f} us/item"
        )


if __name__ == "__main__":
    main()
