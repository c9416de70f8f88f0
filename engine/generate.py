"""The generation loop: prompts in, a stream of per-token events out.

Everything here is synchronous and runs on the engine's single model thread. The HTTP
layer pulls events from :func:`generate` a few at a time, so a request that goes away
stops costing model time after at most one pull.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from engine.models import Model
from engine.protocol import MAX_OUTPUT_WORK, ApiError, CompletionRequest
from engine.sampling import PenaltyState, log_softmax, rank_of, sample, top_ids

FULL_VOCAB_MAX_PROMPT_TOKENS = 1024
# vLLM writes -inf logprobs as this.
NEG_INF_LOGPROB = -9999.0

# A logprob entry in the completion ``logprobs`` shape: (token, logprob, top alternatives)
LogprobEntry = tuple[str, float | None, dict[str, float] | None]


@dataclass
class Prepared:
    """A request with its prompts tokenized and its limits resolved."""

    request: CompletionRequest
    prompt_ids: list[list[int]]
    prompt_texts: list[str]
    max_tokens: int
    requested_max_tokens: int
    max_tokens_defaulted: bool


def prepare(model: Model, req: CompletionRequest) -> Prepared:
    """Tokenize and check lengths; raises ApiError for prompts the model cannot take."""
    ids: list[list[int]] = []
    texts: list[str] = []
    for prompt in req.prompts:
        if isinstance(prompt, str):
            tokens = model.tokenize(prompt, req.add_special_tokens)
            if not tokens:
                raise ApiError(
                    "'prompt' is empty after tokenization (add_special_tokens is false)",
                    param="prompt",
                )
            texts.append(prompt)
        else:
            bad = [t for t in prompt if not 0 <= t < model.vocab_size]
            if bad:
                raise ApiError(
                    f"Token id {bad[0]} is out of vocabulary (size {model.vocab_size})",
                    param="prompt",
                )
            tokens = list(prompt)
            texts.append(model.decode(tokens))
        ids.append(tokens)

    longest = max(len(t) for t in ids)
    if req.prompt_logprobs == -1 and longest > FULL_VOCAB_MAX_PROMPT_TOKENS:
        raise ApiError(
            f"prompt_logprobs=-1 (full vocabulary) allows prompts of at most "
            f"{FULL_VOCAB_MAX_PROMPT_TOKENS} tokens; this one has {longest}. "
            "Use a fixed top-k instead.",
            code="full_vocab_prompt_too_long",
            param="prompt_logprobs",
        )
    limit = model.max_model_len
    defaulted = req.max_tokens is None
    if defaulted:
        room = limit - longest
        if room < 1:
            raise ApiError(
                f"This model's maximum context length is {limit} tokens; the prompt has "
                f"{longest} tokens, leaving no room to generate.",
                code="context_length_exceeded",
                param="prompt",
            )
        max_tokens = min(MAX_OUTPUT_WORK, room)
    else:
        max_tokens = req.max_tokens
        assert max_tokens is not None
        if longest + max_tokens > limit:
            raise ApiError(
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {longest + max_tokens} tokens ({longest} in the prompt, "
                f"{max_tokens} for max_tokens). Please reduce the prompt or max_tokens.",
                code="context_length_exceeded",
                param="max_tokens",
            )
    return Prepared(req, ids, texts, max_tokens, max_tokens, defaulted)


@dataclass
class PromptEvent:
    """Once per prompt, before its samples: what every choice of it shares."""

    prompt_index: int
    prompt_logprobs_json: str | None  # the choice's "prompt_logprobs" value, as JSON
    echo_logprobs: list[LogprobEntry] | None  # prompt tokens in the completion shape


@dataclass
class TokenEvent:
    index: int  # choice index: sample + prompt_index * n
    prompt_index: int
    text: str  # text released by this token (held back while it may start a stop string)
    logprob: LogprobEntry | None
    completion_tokens: int  # tokens of this choice so far
    finish_reason: str | None = None
    stop_reason: str | None = None
    first: bool = False


@dataclass
class _Choice:
    stop: list[str]
    decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )
    text: str = ""
    emitted: int = 0


def generate(
    model: Model, prep: Prepared, seed_rng: np.random.Generator | None = None
) -> Iterator[PromptEvent | TokenEvent]:
    req = prep.request
    sp = req.sampling
    hold = max((len(s) for s in req.stop), default=1) - 1
    prompt_k = req.prompt_logprobs
    echo_k = req.logprobs if (req.echo and req.logprobs is not None) else None
    for p_idx, prompt in enumerate(prep.prompt_ids):
        logits = model.begin(prompt)
        if prompt_k is not None or echo_k is not None:
            rows = log_softmax(model.prompt_logits(prompt))
            yield PromptEvent(
                p_idx,
                None if prompt_k is None else prompt_logprobs_json(model, prompt, rows, prompt_k),
                None if echo_k is None else echo_logprob_entries(model, prompt, rows, echo_k),
            )
        for s in range(req.n):
            if s:
                logits = model.begin(prompt)  # the prompt's KV state is reused, not re-run
            if req.seed is not None:
                # vLLM fans n out into child requests seeded seed + index.
                rng = np.random.default_rng(req.seed + s)
            else:
                rng = seed_rng or np.random.default_rng()
            penalties = PenaltyState(model.vocab_size, prompt) if sp.has_penalties else None
            yield from _one_sample(
                model, prep, p_idx, s, logits, rng, penalties, hold, _Choice(req.stop)
            )


def _one_sample(
    model: Model,
    prep: Prepared,
    p_idx: int,
    s: int,
    logits: np.ndarray,
    rng: np.random.Generator,
    penalties: PenaltyState | None,
    hold: int,
    choice: _Choice,
) -> Iterator[TokenEvent]:
    req = prep.request
    index = s + p_idx * req.n
    longest_stop = max((len(x) for x in req.stop), default=0)
    for step in range(prep.max_tokens):
        token = sample(logits, req.sampling, rng, penalties)  # type: ignore[arg-type]
        if penalties is not None:
            penalties.add(token)
        entry = completion_logprob(model, logits, token, req.logprobs)
        finish = stop_reason = None
        if token in model.eos_ids:
            finish = "stop"
            choice.text += choice.decoder.decode(b"", final=True)
        else:
            before = len(choice.text)
            choice.text += choice.decoder.decode(model.token_bytes(token))
            if req.stop:
                start = max(0, before - longest_stop + 1)
                hits = [(choice.text.find(x, start), x) for x in req.stop]
                hits = [(i, x) for i, x in hits if i >= 0]
                if hits:
                    at, stop_reason = min(hits)
                    choice.text = choice.text[:at]
                    finish = "stop"
            if finish is None and step == prep.max_tokens - 1:
                finish = "length"
                choice.text += choice.decoder.decode(b"", final=True)
        end = len(choice.text) if finish else max(choice.emitted, len(choice.text) - hold)
        delta = choice.text[choice.emitted : end]
        choice.emitted = end
        yield TokenEvent(
            index=index,
            prompt_index=p_idx,
            text=delta,
            logprob=entry,
            completion_tokens=step + 1,
            finish_reason=finish,
            stop_reason=stop_reason,
            first=step == 0,
        )
        if finish:
            return
        logits = model.advance(token)


def _lp(x: float) -> float:
    return max(float(x), NEG_INF_LOGPROB)


def completion_logprob(
    model: Model, logits: np.ndarray, token: int, k: int | None
) -> LogprobEntry | None:
    """The sampled token's raw logprob plus the top k, sampled token first (as vLLM)."""
    if k is None:
        return None
    row = log_softmax(logits)
    top = {model.pieces[token]: _lp(row[token])}
    for t in top_ids(row, k).tolist():
        top.setdefault(model.pieces[t], _lp(row[t]))
    return model.pieces[token], _lp(row[token]), top


def echo_logprob_entries(
    model: Model, prompt: list[int], rows: np.ndarray, k: int
) -> list[LogprobEntry]:
    entries: list[LogprobEntry] = [(model.pieces[prompt[0]], None, None)]
    for i in range(1, len(prompt)):
        row, token = rows[i - 1], prompt[i]
        top = {model.pieces[token]: _lp(row[token])}
        for t in top_ids(row, k).tolist():
            top.setdefault(model.pieces[t], _lp(row[t]))
        entries.append((model.pieces[token], _lp(row[token]), top))
    return entries


_piece_json_cache: dict[int, list[str]] = {}


def _pieces_json(model: Model) -> list[str]:
    key = id(model)
    if key not in _piece_json_cache:
        _piece_json_cache[key] = [json.dumps(p) for p in model.pieces]
    return _piece_json_cache[key]


def prompt_logprobs_json(model: Model, prompt: list[int], rows: np.ndarray, k: int) -> str:
    """vLLM's prompt_logprobs list as JSON text: null, then per position
    {"<id>": {"logprob", "rank", "decoded_token"}} with the actual token first and then
    the top k (k = -1: the whole vocabulary). Built as text because a full-vocabulary
    answer has ~50k entries per position."""
    pieces = _pieces_json(model)
    parts = ["null"]
    for i in range(1, len(prompt)):
        row, actual = rows[i - 1], prompt[i]
        if k == -1:
            order = np.argsort(-row, kind="stable")
            sorted_vals = row[order]
            ranks = np.searchsorted(-sorted_vals, -sorted_vals, side="left") + 1
            ids, rank_list = order.tolist(), ranks.tolist()
            vals = sorted_vals.tolist()
        else:
            top = top_ids(row, k)
            ids = top.tolist()
            vals = row[top].tolist()
            rank_list = [rank_of(row, t) for t in ids]
        fields = [
            f'"{actual}":{{"logprob":{_lp(row[actual])!r},"rank":{rank_of(row, actual)},'
            f'"decoded_token":{pieces[actual]}}}'
        ]
        fields.extend(
            f'"{t}":{{"logprob":{max(v, NEG_INF_LOGPROB)!r},"rank":{r},'
            f'"decoded_token":{pieces[t]}}}'
            for t, v, r in zip(ids, vals, rank_list, strict=True)
            if t != actual
        )
        parts.append("{" + ",".join(fields) + "}")
    return "[" + ",".join(parts) + "]"
