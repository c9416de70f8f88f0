"""The maths of Inspect, as plain functions over the backend's response.

Nothing here touches Django or the network, so every number the page shows can be
unit-tested against hand-made vLLM ``prompt_logprobs`` lists.

vLLM's ``prompt_logprobs`` is a list as long as the prompt: ``None`` for the first
position (nothing predicts it), then per position a dict ``{"<token_id>": {"logprob",
"rank", "decoded_token"}}`` holding the actual token (first) plus the top k; with
``prompt_logprobs=-1`` it holds the whole vocabulary. ``-inf`` arrives as ``-9999.0``.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

LN2 = math.log(2)
# How many alternatives the hover card lists when the request asked for the whole
# vocabulary: 50k entries per position help nobody in a tooltip.
FULL_VOCAB_SHOWN = 10


@dataclass
class Alternative:
    id: int
    text: str
    logprob: float
    rank: int | None


@dataclass
class TokenRow:
    """One prompt position as the page shows it."""

    position: int
    id: int | None
    text: str
    logprob: float | None = None  # None at the first position: nothing predicts it
    rank: int | None = None
    top1_logprob: float | None = None
    entropy_bits: float | None = None  # only with the full vocabulary
    special: bool = False  # the BOS added by add_special_tokens
    top: list[Alternative] = field(default_factory=list)

    @property
    def scored(self) -> bool:
        return self.logprob is not None

    @property
    def bits(self) -> float | None:
        """Surprisal in bits: -log2 p."""
        return None if self.logprob is None else -self.logprob / LN2

    @property
    def prob(self) -> float | None:
        return None if self.logprob is None else math.exp(self.logprob)

    @property
    def delta_top1(self) -> float | None:
        """How far below the model's favourite this token was (0 when it was the favourite)."""
        if self.logprob is None or self.top1_logprob is None:
            return None
        return self.logprob - self.top1_logprob

    @property
    def in_top(self) -> bool:
        return any(alt.id == self.id for alt in self.top)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["bits"] = self.bits
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenRow:
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        data["top"] = [Alternative(**a) for a in data.get("top") or []]
        return cls(**data)


@dataclass
class Summary:
    tokens: int  # every position, the unscored first one included
    scored: int
    total_logprob: float
    mean_logprob: float | None
    perplexity: float | None
    bits_per_token: float | None


def _piece(entry: dict[str, Any]) -> str:
    """A token's text, storable: Postgres text and jsonb cannot hold NUL, and the
    byte-0 token is in every byte-level vocabulary. It is shown as ␀ (ids stay exact)."""
    return str(entry.get("decoded_token") or "").replace("\x00", "\u2400")


def _entry_logprob(entry: dict[str, Any]) -> float:
    return float(entry["logprob"])


def entropy_bits(logprobs: list[float]) -> float:
    """Shannon entropy of a full next-token distribution, in bits.

    The values are renormalised first: the backend's logprobs are log-softmax output,
    but floats summed over 50k entries drift, and -9999.0 stands for -inf (p = 0)."""
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    z = sum(weights)
    h = 0.0
    for w in weights:
        if w > 0.0:
            p = w / z
            h -= p * math.log(p)
    return h / LN2


def exact_rank(logprobs: list[float], actual: float) -> int:
    """vLLM's rank: 1 + the number of tokens with a strictly higher logprob."""
    return 1 + sum(1 for lp in logprobs if lp > actual)


def parse_position(
    position: int,
    entries: dict[str, Any],
    *,
    actual_id: int | None = None,
    full_vocab: bool = False,
    k: int | None = None,
    stats: dict[str, Any] | None = None,
) -> TokenRow:
    """One position's dict -> a TokenRow.

    The actual token is ``actual_id`` when the caller knows the prompt's ids; otherwise
    the first key, because vLLM (and our engine) put the actual token first. ``stats``
    are a full-vocabulary position's entropy and exact rank, computed while the answer
    was read (inspector.fullvocab), when ``entries`` keeps only the best few."""
    if not entries:
        raise ValueError(f"position {position} carries no logprobs")
    keys = list(entries)
    tid = actual_id if actual_id is not None else int(keys[0])
    actual = entries.get(str(tid))
    if actual is None:
        raise ValueError(f"position {position}: token {tid} is not in the backend's answer")
    logprob = _entry_logprob(actual)
    alts = [
        Alternative(int(key), _piece(e), _entry_logprob(e), e.get("rank"))
        for key, e in entries.items()
    ]
    row = TokenRow(
        position=position,
        id=tid,
        text=_piece(actual),
        logprob=logprob,
        rank=actual.get("rank"),
        top1_logprob=_top1(alts, full_vocab),
    )
    if full_vocab and stats:
        row.entropy_bits = stats["entropy_bits"]
        row.rank = stats["rank"]
        shown = FULL_VOCAB_SHOWN if k is None or k < 0 else k
        row.top = heapq.nlargest(shown, alts, key=lambda a: (a.logprob, -a.id))
    elif full_vocab:
        values = [a.logprob for a in alts]
        row.entropy_bits = entropy_bits(values)
        row.rank = exact_rank(values, logprob)
        shown = FULL_VOCAB_SHOWN if k is None or k < 0 else k
        row.top = heapq.nlargest(shown, alts, key=lambda a: (a.logprob, -a.id))
    else:
        # The dict holds the actual token plus the top k: the actual token belongs to
        # the list only when it is one of the k best (rank <= k).
        limit = k if k is not None else len(alts)
        ranked = sorted(alts, key=lambda a: (-a.logprob, a.id))
        row.top = [a for a in ranked if a.id != tid or (a.rank or 0) <= limit][:limit]
    return row


def _top1(alts: list[Alternative], full_vocab: bool) -> float | None:
    """The best token's logprob when the answer holds it: with the full
    vocabulary, or when an entry has rank 1. A k=0 answer holds only the actual
    token, whose logprob is the top-1's only when it is rank 1 itself; ranks
    missing altogether (a backend that sends none) leave the best listed one."""
    if full_vocab or all(a.rank is None for a in alts):
        return max(a.logprob for a in alts)
    first = [a.logprob for a in alts if a.rank == 1]
    return max(first) if first else None


def rows_from_prompt_logprobs(
    prompt_logprobs: list[Any],
    *,
    prompt_ids: Sequence[int | None] | None = None,
    first_text: str = "",
    full_vocab: bool = False,
    k: int | None = None,
    stats: list[Any] | None = None,
) -> list[TokenRow]:
    """Every position of one prompt, the first (unscored) one included.

    ``prompt_ids`` are the ids the caller sent (token-id input) or got from /tokenize;
    they label the first position, which the response leaves as null. Without them
    the first key of each dict is taken as the actual token — true of a fresh vLLM
    answer, not of one read back from jsonb (see :func:`guess_actual_ids`)."""
    if not prompt_logprobs:
        return []
    if prompt_ids is not None and len(prompt_ids) != len(prompt_logprobs):
        prompt_ids = None  # a tokenizer that disagrees with the engine must not relabel
    rows: list[TokenRow] = []
    first_id = prompt_ids[0] if prompt_ids else None
    rows.append(TokenRow(position=0, id=first_id, text=first_text))
    for i, entries in enumerate(prompt_logprobs[1:], start=1):
        actual = prompt_ids[i] if prompt_ids else None
        stat = stats[i] if stats and i < len(stats) else None
        rows.append(
            parse_position(i, entries, actual_id=actual, full_vocab=full_vocab, k=k, stats=stat)
        )
    if rows[0].id is not None and not rows[0].text:
        # The first token's text is not in its own (null) entry; any later position
        # that listed it as an alternative knows it.
        rows[0].text = _text_of(rows[0].id, prompt_logprobs)
    return rows


def guess_actual_ids(
    prompt_logprobs: list[Any], *, text: str | None = None, k: int | None = None
) -> list[int | None]:
    """Which entry at each position is the prompt's own token, when the ids are unknown.

    Needed because a stored answer loses vLLM's "actual token first" order: Postgres
    jsonb keeps object keys sorted its own way. A position holding one entry, or k + 1
    entries (the actual token outside the top k, so the one with the worst rank), says
    so itself; otherwise the token whose text ends what is left of the prompt text,
    walking back from the end, longest first. Callers prefer /tokenize ids."""
    ids: list[int | None] = [None] * len(prompt_logprobs)
    remaining = text
    for i in range(len(prompt_logprobs) - 1, 0, -1):
        entries = prompt_logprobs[i] or {}
        choice: str | None = None
        if len(entries) == 1:
            choice = next(iter(entries))
        elif k is not None and k >= 0 and len(entries) == k + 1:
            choice = max(entries, key=lambda key: entries[key].get("rank") or 0)
        if choice is None and remaining is not None:
            fits = [
                key
                for key, e in entries.items()
                if e.get("decoded_token") and remaining.endswith(e["decoded_token"])
            ]
            if fits:
                choice = max(fits, key=lambda key: len(entries[key]["decoded_token"]))
        if choice is None and entries:
            choice = next(iter(entries))
        if choice is None:
            remaining = None
            continue
        ids[i] = int(choice)
        piece = str(entries[choice].get("decoded_token") or "")
        if remaining is not None and piece and remaining.endswith(piece):
            remaining = remaining[: len(remaining) - len(piece)]
        else:
            remaining = None
    return ids


def build_rows(
    prompt_logprobs: list[Any],
    *,
    prompt_ids: list[int] | None = None,
    tokenized: list[int] | None = None,
    prompt_text: str | None = None,
    add_special_tokens: bool = True,
    full_vocab: bool = False,
    k: int | None = None,
    stats: list[Any] | None = None,
) -> list[TokenRow]:
    """Rows for one scored prompt, with the first position labelled as well as we can.

    Token-id input knows its ids. Text input takes them from /tokenize (when the backend
    has one and it agrees on the length) or else guesses them from the answer. The
    first token's text is what the later tokens leave of the prompt; when nothing is
    left and add_special_tokens was on, it is the BOS the tokenizer added, and the page
    shows it as such."""
    if prompt_ids is None and tokenized is not None and len(tokenized) == len(prompt_logprobs):
        prompt_ids = tokenized
    ids: list[int | None] = (
        list(prompt_ids)
        if prompt_ids is not None
        else guess_actual_ids(prompt_logprobs, text=prompt_text, k=None if full_vocab else k)
    )
    rows = rows_from_prompt_logprobs(
        prompt_logprobs, prompt_ids=ids, full_vocab=full_vocab, k=k, stats=stats
    )
    if not rows:
        return rows
    first = rows[0]
    if first.id is None:
        first.id = first_token(tokenized, [r.id for r in rows])
    rest = "".join(r.text for r in rows[1:])
    if prompt_text is not None and prompt_text.endswith(rest):
        first.text = prompt_text[: len(prompt_text) - len(rest)]
        first.special = add_special_tokens and first.text == ""
    if first.id is not None and not first.text:
        first.text = _text_of(first.id, prompt_logprobs)
    return rows


def _text_of(token_id: int, prompt_logprobs: list[Any]) -> str:
    key = str(token_id)
    for entries in prompt_logprobs[1:]:
        if entries and key in entries:
            return _piece(entries[key])
    return ""


def first_token(tokenized: list[int] | None, rows_ids: list[int | None]) -> int | None:
    """The first prompt token's id from a /tokenize answer.

    ``rows_ids`` are the ids the response gave for positions 1.. . /tokenize may add a
    BOS the completion did not (its add_special_tokens setting can differ), so match the
    tail: the token just before the matching tail is the first position's."""
    if not tokenized:
        return None
    tail = list(rows_ids[1:])
    n = len(rows_ids)
    if len(tokenized) < n:
        return None
    if tokenized[len(tokenized) - n + 1 :] != tail:
        return None
    return tokenized[len(tokenized) - n]


def summarise(rows: list[TokenRow]) -> Summary:
    scored = [r.logprob for r in rows if r.logprob is not None]
    total = sum(scored)
    if not scored:
        return Summary(len(rows), 0, 0.0, None, None, None)
    mean = total / len(scored)
    return Summary(
        tokens=len(rows),
        scored=len(scored),
        total_logprob=total,
        mean_logprob=mean,
        perplexity=math.exp(-mean),
        bits_per_token=-mean / LN2,
    )


# --------------------------------------------------------------------------- colours
# Each mode maps a token to a small bucket number; CSS owns the colours and the page's
# JS only switches which mode's classes are visible.

RANK_EDGES = (10, 100, 1000)  # GLTR's buckets: top-10 / top-100 / top-1000 / rest
REL_EDGES = (0.0, -1.0, -2.5, -5.0, -10.0)  # nats below the top-1 token
DELTA_EDGES = (-2.0, -0.5, 0.5, 2.0)  # Δ logprob (B - A), nats


def rank_bucket(rank: int | None) -> int | None:
    """0 top-10, 1 top-100, 2 top-1000, 3 the rest."""
    if rank is None:
        return None
    for bucket, edge in enumerate(RANK_EDGES):
        if rank <= edge:
            return bucket
    return len(RANK_EDGES)


def rel_bucket(delta: float | None) -> int | None:
    """0 when the token was the model's top choice, up to 5 when far below it."""
    if delta is None:
        return None
    for bucket, edge in enumerate(REL_EDGES):
        if delta >= edge - 1e-9:
            return bucket
    return len(REL_EDGES)


def delta_bucket(delta: float | None) -> int | None:
    """0 much less likely under B … 2 about the same … 4 much more likely under B."""
    if delta is None:
        return None
    for bucket, edge in enumerate(DELTA_EDGES):
        if delta < edge:
            return bucket
    return len(DELTA_EDGES)


def rank_bucket_label(bucket: int | None) -> str:
    if bucket is None:
        return "—"
    return {0: "top-10", 1: "top-100", 2: "top-1000", 3: "rest"}.get(bucket, "—")


# --------------------------------------------------------------------------- choices


@dataclass
class ChoiceScore:
    index: int
    text: str
    total_logprob: float
    tokens: int
    rows: list[TokenRow]

    @property
    def mean_logprob(self) -> float:
        """Length-normalised: per continuation token, so long answers are not
        penalised merely for having more tokens to pay for."""
        return self.total_logprob / self.tokens


def continuation_start(prefix_ids: list[int], full_ids: list[int]) -> int:
    """Where a candidate's continuation begins in tokenize(prefix + candidate).

    Both sequences are tokenized as the model would naturally see them and the
    continuation is everything after their longest common prefix. When the candidate
    merges with the end of the prefix (prefix "… is " + "Paris" tokenizes as "… is"
    " Paris"), the merged token is scored as part of the continuation — the model never
    sees the prefix's own trailing-space token there, so scoring it as shared would
    credit the candidate for a token it does not contain. The alternative, lm-eval's
    tokenize(prefix) + tokenize(candidate), feeds the model token sequences it never
    sees in real text."""
    shared = 0
    for a, b in zip(prefix_ids, full_ids, strict=False):
        if a != b:
            break
        shared += 1
    return shared


def score_choices(
    candidates: list[str],
    starts: list[int],
    prompt_logprobs_per_choice: list[list[Any]],
    prompts: list[list[int]],
) -> list[ChoiceScore]:
    """Sum each candidate's continuation logprobs; the result is best-first by the
    length-normalised score (ties: by total)."""
    scores = []
    for index, (text, start, plp, ids) in enumerate(
        zip(candidates, starts, prompt_logprobs_per_choice, prompts, strict=True)
    ):
        rows = rows_from_prompt_logprobs(plp, prompt_ids=ids)
        cont = rows[max(start, 1) :]
        total = sum(r.logprob for r in cont if r.logprob is not None)
        scores.append(ChoiceScore(index, text, total, len(cont), cont))
    return sorted(scores, key=lambda s: (-s.mean_logprob, -s.total_logprob, s.index))


# --------------------------------------------------------------------------- compare


@dataclass
class DeltaRow:
    a: TokenRow
    b: TokenRow

    @property
    def delta(self) -> float | None:
        if self.a.logprob is None or self.b.logprob is None:
            return None
        return self.b.logprob - self.a.logprob


def align_from_end(
    rows_a: list[TokenRow], rows_b: list[TokenRow], *, max_chars: int | None = None
) -> list[DeltaRow]:
    """Pair the tokens two scorings share, matching from the end of the text.

    Two prefixes before the same text, or two models with different tokenizers, give
    different token lists; a token is compared only where both sides cut the text at
    the same place into the same piece. Offsets count back from the end of the text,
    which is the part both sides have in common; ``max_chars`` (the text's length)
    keeps a shared prefix out of the comparison."""

    def spans(rows: list[TokenRow]) -> dict[tuple[int, str], TokenRow]:
        out: dict[tuple[int, str], TokenRow] = {}
        end = 0
        for row in reversed(rows):
            out[(end, row.text)] = row
            end += len(row.text)
        return out

    b_spans = spans(rows_b)
    paired: list[DeltaRow] = []
    end = 0
    for row in reversed(rows_a):
        other = b_spans.get((end, row.text))
        end += len(row.text)
        if other is None or (max_chars is not None and end > max_chars):
            break  # past the shared text (or the tokenizations part): stop pairing
        paired.append(DeltaRow(row, other))
    paired.reverse()
    return paired


# --------------------------------------------------------------------------- export

EXPORT_FIELDS = [
    "position",
    "id",
    "text",
    "logprob",
    "rank",
    "surprisal_bits",
    "top1_logprob",
    "entropy_bits",
    "special",
    "top",
]


def export_record(row: TokenRow) -> dict[str, Any]:
    return {
        "position": row.position,
        "id": row.id,
        "text": row.text,
        "logprob": row.logprob,
        "rank": row.rank,
        "surprisal_bits": row.bits,
        "top1_logprob": row.top1_logprob,
        "entropy_bits": row.entropy_bits,
        "special": row.special,
        "top": [asdict(a) for a in row.top],
    }


def export_records(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored row dicts -> export records; keys beyond a TokenRow's (a compare's
    ``logprob_a`` and ``delta``, a choice's ``choice``) are kept as extra columns."""
    records = []
    for data in stored:
        record = export_record(TokenRow.from_dict(data))
        for key, value in data.items():
            if key not in TokenRow.__dataclass_fields__ and key not in record:
                record[key] = value
        records.append(record)
    return records


def to_jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def to_csv(records: list[dict[str, Any]]) -> str:
    fields = list(EXPORT_FIELDS)
    for record in records:
        fields.extend(key for key in record if key not in fields)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for record in records:
        flat = dict(record)
        flat["top"] = json.dumps(flat.get("top") or [], ensure_ascii=False)
        writer.writerow({k: "" if v is None else v for k, v in flat.items()})
    return out.getvalue()
