"""What the samples grid and the token view show, computed once in Python so the
templates stay simple: per-sample stats, where each sample leaves the others, and
the token view (core/tokens.py, shared with the Loom and Inspect).

Nothing here marks text safe: templates escape every string at render time.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from django.utils.safestring import SafeString

from core.tokens import LEGEND, Chip, chips_for, chips_html, logprob_stats

__all__ = [
    "LEGEND", "ComparedPair", "SampleView", "compare_pairs", "divergence_points", "run_choices",
    "sample_view", "sample_views",
]  # fmt: skip


def divergence_points(texts: list[str]) -> list[int | None]:
    """For each text, the character where it leaves every other text: the length of its
    longest common prefix with any other one. None when there is nothing to compare
    with, or when the text is a prefix of (or equal to) another."""
    if len(texts) < 2:
        return [None] * len(texts)
    points: list[int | None] = []
    for i, text in enumerate(texts):
        best = 0
        for j, other in enumerate(texts):
            if i != j:
                best = max(best, len(os.path.commonprefix((text, other))))  # by character
        points.append(None if best >= len(text) else best)
    return points


@dataclass
class SampleView:
    index: int
    text: str
    finish_reason: str
    stop_reason: str
    token_count: int | None
    mean_logprob: float | None
    diverge_at: int | None
    tokens: list[Chip] | None = None
    head: str = field(default="")  # text before the divergence point
    tail: str = field(default="")

    @property
    def tokens_html(self) -> SafeString:
        return chips_html(self.tokens or [])

    @property
    def perplexity(self) -> float | None:
        return None if self.mean_logprob is None else math.exp(-self.mean_logprob)


def sample_views(choices: list[dict[str, Any]], *, usage: dict | None = None) -> list[SampleView]:
    """Views of a generation's choices (or a Run's samples as choice dicts)."""
    texts = [c.get("text") or "" for c in choices]
    points = divergence_points(texts)
    total = usage if len(choices) == 1 else None  # the usage counts this one sample's tokens
    return [
        sample_view(choice, point, i, usage=total)
        for i, (choice, point) in enumerate(zip(choices, points, strict=True))
    ]


def sample_view(
    choice: dict[str, Any], diverge_at: int | None, position: int, *, usage: dict | None = None
) -> SampleView:
    """One choice as the grid shows it, marked where it diverges (`diverge_at`)."""
    text = choice.get("text") or ""
    count, mean = logprob_stats(choice.get("logprobs"))
    if count is None:
        count = choice.get("completion_tokens")
    if count is None and usage:
        # Without logprobs only the total is known; with one sample it is exact.
        count = usage.get("completion_tokens")
    view = SampleView(
        index=int(choice.get("index", position)),
        text=text,
        finish_reason=choice.get("finish_reason") or "",
        stop_reason="" if choice.get("stop_reason") is None else str(choice["stop_reason"]),
        token_count=count,
        mean_logprob=mean,
        diverge_at=diverge_at,
        tokens=chips_for(text, choice.get("logprobs"), diverge_at=diverge_at),
    )
    if diverge_at is not None:
        view.head, view.tail = text[:diverge_at], text[diverge_at:]
    return view


@dataclass
class ComparedPair:
    """Sample i of run A beside sample i of run B (either may be missing)."""

    index: int
    a: SampleView | None
    b: SampleView | None
    diverge_at: int | None  # the first character where they differ; None if identical

    @property
    def identical(self) -> bool:
        return self.a is not None and self.b is not None and self.diverge_at is None


def compare_pairs(
    choices_a: list[dict[str, Any]], choices_b: list[dict[str, Any]]
) -> list[ComparedPair]:
    """Two runs' samples side by side, index by index, each pair marked at its first
    divergence (the length of the texts' common prefix)."""
    by_a = {int(c.get("index", i)): c for i, c in enumerate(choices_a)}
    by_b = {int(c.get("index", i)): c for i, c in enumerate(choices_b)}
    pairs = []
    for index in sorted(by_a.keys() | by_b.keys()):
        a, b = by_a.get(index), by_b.get(index)
        point = None
        if a is not None and b is not None:
            ta, tb = a.get("text") or "", b.get("text") or ""
            common = len(os.path.commonprefix([ta, tb]))
            point = None if ta == tb else common
        pairs.append(
            ComparedPair(
                index,
                None if a is None else sample_view(a, _inside(point, a), index),
                None if b is None else sample_view(b, _inside(point, b), index),
                point,
            )
        )
    return pairs


def _inside(point: int | None, choice: dict[str, Any]) -> int | None:
    """The mark's place in this text: none past its end (it is a prefix of the other)."""
    if point is None or point >= len(choice.get("text") or ""):
        return None
    return point


def run_choices(run: Any) -> list[dict[str, Any]]:
    return [
        {
            "index": s.index,
            "text": s.text,
            "finish_reason": s.finish_reason,
            "stop_reason": s.stop_reason or None,
            "logprobs": s.logprobs,
        }
        for s in run.samples.all()
    ]
