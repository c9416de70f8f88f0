"""What the samples grid and the token view show, computed once in Python so the
templates stay simple: per-sample stats, where each sample leaves the others, and
per-token probability colouring with its top-k alternatives.

Nothing here marks text safe: templates escape every string at render time.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from workbench.models import logprob_stats

# Probability colours on a log scale: bin = floor(-2·log10 p), so each bin spans half a
# decade (p ≥ .32, ≥ .1, ≥ .032, ≥ .01, …); the last bin holds everything rarer.
BINS = 8
# (bin, label): bin b holds p >= 10^-(b+1)/2; the last bin everything rarer.
LEGEND = [(b, f"≥ {10 ** (-(b + 1) / 2):.2g}") for b in range(BINS - 1)] + [
    (BINS - 1, f"< {10 ** (-(BINS - 1) / 2):.2g}")
]


def prob_bin(logprob: float | None) -> int | None:
    if logprob is None:
        return None
    if logprob >= 0:
        return 0
    return min(BINS - 1, int(math.floor(-2 * logprob / math.log(10))))


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
                best = max(best, len(_common_prefix(text, other)))
        points.append(None if best >= len(text) else best)
    return points


def _common_prefix(a: str, b: str) -> str:
    n = 0
    limit = min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return a[:n]


@dataclass
class Token:
    text: str  # what is shown: exactly the sample's text for this token when aligned
    logprob: float | None
    bin: int | None
    in_text: bool  # False for pieces not in the text (BOS, byte fallbacks)
    start: int  # character offset in the sample's text
    alternatives: str = "[]"  # JSON [[token, probability, sampled?], ...] for the popover
    coverage: float | None = None
    diverges: bool = False

    @property
    def prob(self) -> float | None:
        return None if self.logprob is None else math.exp(self.logprob)


@dataclass
class SampleView:
    index: int
    text: str
    finish_reason: str
    stop_reason: str
    token_count: int | None
    mean_logprob: float | None
    diverge_at: int | None
    tokens: list[Token] | None = None
    head: str = field(default="")  # text before the divergence point
    tail: str = field(default="")

    @property
    def perplexity(self) -> float | None:
        return None if self.mean_logprob is None else math.exp(-self.mean_logprob)


def tokens_for(text: str, logprobs: dict | None, diverge_at: int | None) -> list[Token] | None:
    """Align the logprobs' token pieces with the sample text. A piece found at the
    current position is shown as that slice of the text; one that is not (BOS, a byte
    fallback like <0x0A>) is shown but marked not-in-text so branching skips it."""
    if not logprobs or not logprobs.get("tokens"):
        return None
    pieces = logprobs.get("tokens") or []
    lps = logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or []
    tokens: list[Token] = []
    pos = 0
    marked = False
    for i, piece in enumerate(pieces):
        piece = piece if isinstance(piece, str) else str(piece)
        lp = lps[i] if i < len(lps) and isinstance(lps[i], int | float) else None
        in_text = bool(piece) and text.startswith(piece, pos)
        token = Token(piece, lp, prob_bin(lp), in_text, pos)
        if in_text:
            pos += len(piece)
        top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else None
        if top:
            ranked = sorted(top.items(), key=lambda kv: kv[1], reverse=True)
            token.alternatives = json.dumps(
                [[tok, round(math.exp(v), 6), tok == piece] for tok, v in ranked]
            )
            token.coverage = sum(math.exp(v) for _, v in ranked)
        if diverge_at is not None and not marked and in_text and pos > diverge_at:
            token.diverges = marked = True
        tokens.append(token)
    return tokens


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
            tokens=tokens_for(text, choice.get("logprobs"), point),
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
