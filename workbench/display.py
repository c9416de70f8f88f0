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

from core.tokens import LEGEND, Chip, chips_for, chips_html
from workbench.models import logprob_stats

__all__ = ["LEGEND", "SampleView", "divergence_points", "run_choices", "sample_views"]


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
    views = []
    for choice, text, point in zip(choices, texts, points, strict=True):
        count, mean = logprob_stats(choice.get("logprobs"))
        if count is None:
            count = choice.get("completion_tokens")
        if count is None and len(choices) == 1 and usage:
            # Without logprobs only the total is known; with one sample it is exact.
            count = usage.get("completion_tokens")
        view = SampleView(
            index=int(choice.get("index", len(views))),
            text=text,
            finish_reason=choice.get("finish_reason") or "",
            stop_reason="" if choice.get("stop_reason") is None else str(choice["stop_reason"]),
            token_count=count,
            mean_logprob=mean,
            diverge_at=point,
            tokens=chips_for(text, choice.get("logprobs"), diverge_at=point),
        )
        if point is not None:
            view.head, view.tail = text[:point], text[point:]
        views.append(view)
    return views


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
