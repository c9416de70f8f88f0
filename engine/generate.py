"""What one request needs around the model: its prompts tokenized and checked
(:func:`prepare`), the events the scheduler sends back, each choice's text with stop
strings (:class:`ChoiceText`) and the logprob shapes of vLLM's answers.

Tokenizing runs on any thread; the rest runs on the scheduler's model thread.
"""

from __future__ import annotations

import codecs
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import IO

import numpy as np

from completions.schema import (
    DEFAULT_FULL_VOCAB_MAX_PROMPT_TOKENS as FULL_VOCAB_MAX_PROMPT_TOKENS,
)
from completions.schema import default_max_tokens, full_vocab_too_long
from engine.models import Model
from engine.protocol import ApiError, CompletionRequest
from engine.sampling import log_softmax, rank_of, top_ids

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
            "prompt_logprobs: " + full_vocab_too_long(FULL_VOCAB_MAX_PROMPT_TOKENS, longest),
            code="full_vocab_prompt_too_long",
            param="prompt_logprobs",
        )
    limit = model.max_model_len
    defaulted = req.max_tokens is None
    if req.max_tokens is None:
        room = limit - longest
        if room < 1:
            raise ApiError(
                f"This model's maximum context length is {limit} tokens; the prompt has "
                f"{longest} tokens, leaving no room to generate.",
                code="context_length_exceeded",
                param="prompt",
            )
        max_tokens = default_max_tokens(limit, longest)
    else:
        max_tokens = req.max_tokens
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
class FullVocabRows:
    """Full-vocabulary prompt logprobs of one prompt, kept as float32 log-softmax rows in
    an unlinked temporary file (a 1,024-token prompt is ~200 MB of floats): the response
    encodes them position by position while it streams the body out."""

    prompt: list[int]
    vocab_size: int
    file: IO[bytes] = field(default_factory=lambda: tempfile.TemporaryFile(prefix="weft-plp-"))

    def append(self, rows: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(rows, dtype=np.float32).tobytes())

    def row(self, i: int) -> np.ndarray:
        """Log-probabilities predicting prompt[i + 1]."""
        size = self.vocab_size * 4
        self.file.flush()
        data = os.pread(self.file.fileno(), size, i * size)
        return np.frombuffer(data, dtype=np.float32)

    def close(self) -> None:
        self.file.close()


@dataclass
class PromptEvent:
    """Once per prompt, before its samples: what every choice of it shares."""

    prompt_index: int
    # the choice's "prompt_logprobs" value: JSON text (top k), or rows to encode (k = -1)
    prompt_logprobs: str | FullVocabRows | None
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
class Finished:
    """Last event of a request: every choice is done."""


@dataclass
class Failed:
    """Last event of a request that the model could not finish."""

    error: ApiError


Event = PromptEvent | TokenEvent | Finished | Failed


class ChoiceText:
    """A choice's text as tokens arrive: UTF-8 decoded incrementally, cut at the first
    stop string, and held back while its tail may still begin one."""

    def __init__(self, model: Model, prep: Prepared) -> None:
        self.model = model
        self.stop = prep.request.stop
        self.max_tokens = prep.max_tokens
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.longest_stop = max((len(s) for s in self.stop), default=0)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.emitted = 0
        self.count = 0

    def add(self, token: int) -> tuple[str, str | None, str | None]:
        """(text released, finish_reason, stop_reason) after one more token."""
        self.count += 1
        finish = stop_reason = None
        if token in self.model.eos_ids:
            finish = "stop"
            self.text += self.decoder.decode(b"", final=True)
        else:
            before = len(self.text)
            self.text += self.decoder.decode(self.model.token_bytes(token))
            if self.stop:
                start = max(0, before - self.longest_stop + 1)
                hits = [(self.text.find(x, start), x) for x in self.stop]
                hits = [(i, x) for i, x in hits if i >= 0]
                if hits:
                    at, stop_reason = min(hits)
                    self.text = self.text[:at]
                    finish = "stop"
            if finish is None and self.count >= self.max_tokens:
                finish = "length"
                self.text += self.decoder.decode(b"", final=True)
        end = len(self.text) if finish else max(self.emitted, len(self.text) - self.hold)
        delta = self.text[self.emitted : end]
        self.emitted = end
        return delta, finish, stop_reason


class PromptScorer:
    """Builds a prompt's logprobs from the logits rows of its positions, as the scheduler
    evaluates the prompt chunk by chunk (so at most one chunk of rows is in memory)."""

    def __init__(self, model: Model, prep: Prepared, prompt_index: int) -> None:
        req = prep.request
        self.model = model
        self.prompt_index = prompt_index
        self.prompt = prep.prompt_ids[prompt_index]
        self.k = req.prompt_logprobs
        self.echo_k = req.logprobs if (req.echo and req.logprobs is not None) else None
        self.parts: list[str] = ["null"]
        self.full = FullVocabRows(self.prompt, model.vocab_size) if self.k == -1 else None
        self.echo: list[LogprobEntry] = [(model.pieces[self.prompt[0]], None, None)]

    @property
    def wanted(self) -> bool:
        return self.k is not None or self.echo_k is not None

    def add(self, logits: np.ndarray, start: int) -> None:
        """Rows ``start, start + 1, ...`` predicting prompt[start + 1], ... (rows past the
        prompt's end are ignored)."""
        usable = min(len(logits), len(self.prompt) - 1 - start)
        if usable <= 0:
            return
        rows = log_softmax(logits[:usable])
        if self.full is not None:
            self.full.append(rows)
        for offset in range(usable):
            row, actual = rows[offset], self.prompt[start + offset + 1]
            if self.k is not None and self.k != -1:
                self.parts.append(top_k_position_json(self.model, row, actual, self.k))
            if self.echo_k is not None:
                self.echo.append(_entry(self.model, row, actual, self.echo_k))

    def event(self) -> PromptEvent:
        plp: str | FullVocabRows | None = None
        if self.full is not None:
            plp = self.full
        elif self.k is not None:
            plp = "[" + ",".join(self.parts) + "]"
        return PromptEvent(self.prompt_index, plp, self.echo if self.echo_k is not None else None)


def _lp(x: float) -> float:
    return max(float(x), NEG_INF_LOGPROB)


def _entry(model: Model, row: np.ndarray, token: int, k: int) -> LogprobEntry:
    """The token's raw logprob plus the top k, the token first (as vLLM)."""
    top = {model.pieces[token]: _lp(row[token])}
    for t in top_ids(row, k).tolist():
        top.setdefault(model.pieces[t], _lp(row[t]))
    return model.pieces[token], _lp(row[token]), top


def completion_logprob(model: Model, row: np.ndarray, token: int, k: int) -> LogprobEntry:
    """``row`` is a log-softmax row of the raw logits the token was drawn from."""
    return _entry(model, row, token, k)


_piece_json_cache: dict[int, list[str]] = {}


def pieces_json(model: Model) -> list[str]:
    key = id(model)
    if key not in _piece_json_cache:
        _piece_json_cache[key] = [json.dumps(p) for p in model.pieces]
    return _piece_json_cache[key]


def top_k_position_json(model: Model, row: np.ndarray, actual: int, k: int) -> str:
    """One position of vLLM's prompt_logprobs: {"<id>": {"logprob", "rank",
    "decoded_token"}} with the actual token first, then the top k."""
    pieces = pieces_json(model)
    top = top_ids(row, k)
    fields = [
        f'"{actual}":{{"logprob":{_lp(row[actual])!r},"rank":{rank_of(row, actual)},'
        f'"decoded_token":{pieces[actual]}}}'
    ]
    fields.extend(
        f'"{t}":{{"logprob":{_lp(row[t])!r},"rank":{rank_of(row, t)},"decoded_token":{pieces[t]}}}'
        for t in top.tolist()
        if t != actual
    )
    return "{" + ",".join(fields) + "}"
