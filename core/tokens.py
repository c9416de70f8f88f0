"""The token view every page shares: logprobs → chips, one colour scale, one chip markup.

A chip is one piece of a text with the probability the model gave it and the
alternatives it considered. `chips_for` aligns vLLM's completion ``logprobs`` to the
text they produced: the text is the truth (a node edited later, a stop string cut
off, the model's stop token listed after the last character), and byte-level
tokens that are only part of a character ("�" on their own) are merged until they
cover whole characters of the text, with their combined probability.

The chip markup is built here, not in a template loop, because the Loom colours
every model-written segment of a path (thousands of chips) and the worker's live
fragments need the same markup; `templates/kit/_tokens.html` holds the legend and
the container. Every string goes through `html.escape`; nothing generated is
marked safe before that.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.safestring import SafeString

# Probability colours on a log scale: bin = floor(-2·log10 p), so each bin spans half a
# decade (p ≥ .32, ≥ .1, ≥ .032, ≥ .01, …); the last bin holds everything rarer.
BINS = 8
LEGEND: list[tuple[int, str]] = [(b, f"≥ {10 ** (-(b + 1) / 2):.2g}") for b in range(BINS - 1)] + [
    (BINS - 1, f"< {10 ** (-(BINS - 1) / 2):.2g}")
]
REPLACEMENT = "\ufffd"
# vLLM sends -inf as -9999.0: such a token had no probability at all.
NO_PROBABILITY = -9999.0
# Pieces that stand for no text: special tokens (the stop token <|im_end|>, BOS) and
# SentencePiece byte fallbacks.
_SPECIAL = re.compile(r"<\|[^|<>]{1,40}\|>|</?s>|<0x[0-9A-Fa-f]{2}>|<[a-z_]{1,20}>")
# A byte-level group longer than this is not one character run: give up aligning.
_MAX_GROUP = 24


def visible_text(text: str) -> str:
    """Whitespace a reader can see inside a chip: a token that is only a newline or a
    space would otherwise render as nothing."""
    return text.replace("\n", "↵").replace("\t", "⇥").replace(" ", "·")


def logprob_stats(logprobs: dict | None) -> tuple[int | None, float | None]:
    """(token count, mean logprob) from a choice's logprobs block; None when absent.
    Echoed prompt tokens carry a null logprob and are skipped in the mean."""
    if not logprobs or logprobs.get("tokens") is None:
        return None, None
    values = [v for v in logprobs.get("token_logprobs") or [] if isinstance(v, int | float)]
    mean = sum(values) / len(values) if values else None
    return len(logprobs["tokens"]), mean


def prob_bin(logprob: float | None) -> int | None:
    """The colour bin of a logprob: 0 (p ≥ 10^-0.5) … BINS-1 (rarest); None without one."""
    if logprob is None or not isinstance(logprob, int | float) or math.isnan(logprob):
        return None
    if logprob >= 0:
        return 0
    return min(BINS - 1, int(math.floor(-2 * logprob / math.log(10))))


def probability(logprob: float | None) -> float | None:
    if logprob is None:
        return None
    if logprob <= NO_PROBABILITY:
        return 0.0
    return math.exp(min(0.0, logprob))


@dataclass
class Chip:
    """One piece of text as the token view shows it."""

    text: str
    logprob: float | None = None
    in_text: bool = True  # False for pieces that stand for no text (the stop token, BOS)
    index: int | None = None  # the first token's position in the logprobs (branch point)
    alternatives: list[tuple[str, float, bool]] = field(default_factory=list)
    diverges: bool = False
    info: str = ""  # a line the popover shows above the alternatives
    classes: str = ""  # page-specific classes (Inspect's other colour modes)
    attrs: dict[str, str] = field(default_factory=dict)  # page-specific data-* attributes

    @property
    def bin(self) -> int | None:
        return prob_bin(self.logprob)

    @property
    def prob(self) -> float | None:
        return probability(self.logprob)

    @property
    def coverage(self) -> float:
        """The probability mass the listed alternatives cover."""
        return sum(p for _, p, _ in self.alternatives)


def alternatives(top: Any, sampled: str) -> list[tuple[str, float, bool]]:
    """A top_logprobs dict as (token, probability, is the sampled one), likeliest first."""
    if not isinstance(top, dict):
        return []
    ranked = sorted(
        ((str(t), v) for t, v in top.items() if isinstance(v, int | float)),
        key=lambda kv: kv[1],
        reverse=True,
    )
    return [(t, round(probability(v) or 0.0, 6), t == sampled) for t, v in ranked]


def _columns(logprobs: Any) -> tuple[list[str], list[Any], list[Any]]:
    if not isinstance(logprobs, dict):
        return [], [], []
    pieces = logprobs.get("tokens")
    if not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces):
        return [], [], []  # stored by an older import that did not check the shape
    lps = logprobs.get("token_logprobs")
    tops = logprobs.get("top_logprobs")
    return pieces, lps if isinstance(lps, list) else [], tops if isinstance(tops, list) else []


def _number(values: list[Any], i: int) -> float | None:
    v = values[i] if i < len(values) else None
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _group_pattern(joined: str) -> re.Pattern[str]:
    """The text a run of byte-level pieces may stand for: its literal characters as
    they are, each run of k "�" as 1..k characters (bytes of split characters)."""
    parts = []
    for run in re.split(f"({REPLACEMENT}+)", joined):
        if run.startswith(REPLACEMENT):
            parts.append(f".{{1,{len(run)}}}")
        elif run:
            parts.append(re.escape(run))
    return re.compile("".join(parts), re.DOTALL)


def _fits_at(piece: str | None, text: str, at: int) -> bool:
    """Could `piece` (the token after a byte group) start at `at`?"""
    if piece is None:
        return at == len(text)
    if text.startswith(piece, at) or _SPECIAL.fullmatch(piece):
        return True
    head = piece.split(REPLACEMENT, 1)[0]
    if REPLACEMENT in piece and head:
        return text.startswith(head, at)
    rest = text[at:]
    return bool(rest) and piece.startswith(rest)


def _byte_group(text: str, pos: int, pieces: list[str], i: int) -> tuple[int, int] | None:
    """(end token, end character) of the byte-level pieces starting at token i:
    the piece itself plus the following ones that continue its character (they start
    with "�"), matched against the text at `pos`."""
    j = i + 1
    while j < len(pieces) and j - i < _MAX_GROUP and pieces[j].startswith(REPLACEMENT):
        if text.startswith(pieces[j], pos):  # a real "�" in the text is text
            break
        j += 1
    joined = "".join(pieces[i:j])
    pattern = _group_pattern(joined)
    after = pieces[j] if j < len(pieces) else None
    first = None
    for end in range(pos + 1, min(len(text), pos + len(joined)) + 1):
        if pattern.fullmatch(text, pos, end):
            if _fits_at(after, text, end):
                return j, end
            first = first or end
    return (j, first) if first else None


def chips_for(text: str, logprobs: Any, *, diverge_at: int | None = None) -> list[Chip] | None:
    """Chips for `text` from its completion logprobs, or None when there are none.

    The in-text chips always join to exactly `text`: what the tokens no longer
    cover (the node was edited) is one plain chip at the end."""
    pieces, lps, tops = _columns(logprobs)
    if not pieces:
        return None
    chips: list[Chip] = []
    pos = i = 0
    while i < len(pieces):
        piece = pieces[i]
        if piece and text.startswith(piece, pos):
            j, end = i + 1, pos + len(piece)
        elif REPLACEMENT in piece and (group := _byte_group(text, pos, pieces, i)):
            j, end = group
        elif piece and text[pos:] and piece.startswith(text[pos:]):
            j, end = i + 1, len(text)  # a stop string cut the last token short
        elif not piece or _SPECIAL.fullmatch(piece):
            chips.append(_chip(piece, i, i + 1, lps, tops, pieces, in_text=False))
            i += 1
            continue
        else:
            break  # the text was changed here: the rest is plain text
        chip = _chip(text[pos:end], i, j, lps, tops, pieces)
        if diverge_at is not None and pos <= diverge_at < end:
            chip.diverges = True
        chips.append(chip)
        pos, i = end, j
    if pos < len(text):
        chips.append(Chip(text[pos:]))
    return chips


def text_before(text: str, logprobs: Any, index: int) -> str | None:
    """The text before the chip that starts at token `index` (a branch point), or None
    when no chip starts there."""
    pos = 0
    for chip in chips_for(text, logprobs) or []:
        if chip.index == index:
            return text[:pos]
        if chip.in_text:
            pos += len(chip.text)
    return None


def _chip(
    shown: str,
    i: int,
    j: int,
    lps: list[Any],
    tops: list[Any],
    pieces: list[str],
    *,
    in_text: bool = True,
) -> Chip:
    values = [_number(lps, k) for k in range(i, j)]
    # Merged byte pieces: the character's probability is the product of its pieces'.
    logprob = None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]
    top = tops[i] if i < len(tops) else None
    return Chip(shown, logprob, in_text=in_text, index=i, alternatives=alternatives(top, pieces[i]))


def plain_chips(text: str) -> list[Chip]:
    return [Chip(text)] if text else []


# --------------------------------------------------------------------------- markup


def chip_html(chip: Chip) -> str:
    """One chip's markup. tokens.js builds the popover from its data attributes."""
    esc = html.escape
    classes = ["tok"]
    bin_ = chip.bin
    classes.append(f"p{bin_}" if bin_ is not None else "nolp")
    if chip.diverges:
        classes.append("diverge")
    if not chip.in_text:
        classes.append("extra")
    if chip.classes:
        classes.append(chip.classes)
    attrs = [f'class="{esc(" ".join(classes))}"']
    if chip.in_text:
        attrs.append("data-in")
    if chip.logprob is not None or chip.alternatives:
        attrs.append('tabindex="0"')
        if chip.index is not None:
            attrs.append(f'data-i="{int(chip.index)}"')
        if chip.logprob is not None:
            attrs.append(f'data-lp="{chip.logprob!r}"')
        attrs.append(
            f'data-alts="{esc(json.dumps(chip.alternatives, ensure_ascii=False))}"'
            f' data-cov="{chip.coverage:.6g}"'
        )
    if chip.info:
        attrs.append(f'data-info="{esc(chip.info)}"')
    for key, value in chip.attrs.items():
        attrs.append(f'data-{esc(key)}="{esc(value)}"')
    return f"<span {' '.join(attrs)}>{esc(chip.text)}</span>"


def chips_html(chips: Iterable[Chip]) -> SafeString:
    # Safe only because chip_html escapes every string it puts in.
    return SafeString("".join(chip_html(c) for c in chips))


# --------------------------------------------------------------------------- live


class LiveChips:
    """Chips for a streaming choice, chunk by chunk.

    A chunk's text and its tokens need not line up: the backend holds text back
    while a stop string may still match, and a character split over byte tokens
    arrives with its last piece. Tokens and text are kept until they align, then
    turned into chips; `flush` gives what is left."""

    def __init__(self) -> None:
        self.text = ""
        self.base = 0  # tokens already turned into chips
        self.tokens: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": []}

    def feed(self, text: str, logprobs: Any) -> list[Chip]:
        self.text += text
        pieces, lps, tops = _columns(logprobs)
        for k, piece in enumerate(pieces):
            self.tokens["tokens"].append(piece)
            self.tokens["token_logprobs"].append(_number(lps, k))
            self.tokens["top_logprobs"].append(tops[k] if k < len(tops) else None)
        if not self.tokens["tokens"]:
            out, self.text = plain_chips(self.text), ""
            return out
        chips = chips_for(self.text, self.tokens) or []
        # Keep back the last token's chip and what follows: its character may be
        # incomplete, or its text still held back by the backend.
        last = max((k for k, c in enumerate(chips) if c.index is not None), default=None)
        if last is None:
            return []
        ready = self._numbered(chips[:last])
        self.text = self.text[sum(len(c.text) for c in ready if c.in_text) :]
        used = chips[last].index or 0
        for key in self.tokens:
            del self.tokens[key][:used]
        self.base += used
        return ready

    def _numbered(self, chips: list[Chip]) -> list[Chip]:
        for chip in chips:
            if chip.index is not None:
                chip.index += self.base
        return chips

    def flush(self) -> list[Chip]:
        chips = chips_for(self.text, self.tokens) if self.tokens["tokens"] else None
        out = self._numbered(chips) if chips is not None else plain_chips(self.text)
        self.text = ""
        for key in self.tokens:
            self.tokens[key].clear()
        return out


def chip_dicts(chips: Sequence[Chip]) -> list[dict[str, Any]]:
    """Chips as plain data for a channel-layer message (msgpack-able)."""
    return [
        {
            "text": c.text,
            "logprob": c.logprob,
            "in_text": c.in_text,
            "index": c.index,
            "alternatives": [list(a) for a in c.alternatives],
        }
        for c in chips
    ]


def chips_from_dicts(data: Iterable[dict[str, Any]]) -> list[Chip]:
    return [
        Chip(
            str(d.get("text", "")),
            d.get("logprob"),
            in_text=bool(d.get("in_text", True)),
            index=d.get("index"),
            alternatives=[(str(t), float(p), bool(s)) for t, p, s in d.get("alternatives") or []],
        )
        for d in data
    ]
