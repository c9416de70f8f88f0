"""The full-vocabulary encoder (byte matrices and numpy, engine/encode.py) writes exactly
what a plain per-entry encoding writes: vLLM's order (the actual token first, then by
rank, ties by id), vLLM's ranks, orjson's floats clamped like the rest of the engine,
and the decoded tokens JSON-escaped — ties, -inf, tiny values and escapes included."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest

from engine.encode import FullVocabEncoder
from engine.generate import NEG_INF_LOGPROB
from engine.models import Model, ScriptedModel


def reference(model: Model, row: np.ndarray, actual: int) -> bytes:
    """One entry at a time, the obvious way."""
    vocab = model.vocab_size
    by_rank = sorted(range(vocab), key=lambda t: (-float(row[t]), t))
    ordered = [actual] + [t for t in by_rank if t != actual]
    entries = []
    for t in ordered:
        rank = 1 + int(np.count_nonzero(row > row[t]))
        logprob = orjson.dumps(max(float(row[t]), NEG_INF_LOGPROB)).decode()
        piece = json.dumps(model.pieces[t])
        entries.append(f'"{t}":{{"logprob":{logprob},"rank":{rank},"decoded_token":{piece}}}')
    return ("{" + ",".join(entries) + "}").encode()


def rows_for(vocab: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    rows = []
    for i in range(4):
        x = rng.standard_normal(vocab) * (1 + 2 * i)
        x = x - np.log(np.exp(x).sum())
        x[rng.integers(0, vocab, 40)] = x[3]  # ties, ordered by id
        x[:2] = -np.inf  # clamped to NEG_INF_LOGPROB, ranked last
        x[5] = -3.2e-9  # exponent notation
        x[6] = -12345.678  # below the clamp
        rows.append(x.astype(np.float32))
    return rows


def check(model: Model, rows: int) -> None:
    encoder = FullVocabEncoder(model)
    rows_ = rows_for(model.vocab_size)
    for row in rows_[:rows]:
        tied = 3
        for actual in (0, tied, 5, int(np.argmax(row)), model.vocab_size - 1):
            got = encoder.position(row, actual)
            assert got == reference(model, row, actual)
            assert next(iter(json.loads(got))) == str(actual)
    span = encoder.positions([(rows_[0], 4), (rows_[1], 9)])
    assert span == b",".join([b"", reference(model, rows_[0], 4), reference(model, rows_[1], 9)])


def test_it_encodes_the_scripted_vocabulary_exactly() -> None:
    model = ScriptedModel()
    assert any('"' in p or "\\" in p for p in model.pieces)  # escapes are exercised
    check(model, rows=4)


@pytest.mark.slow
def test_it_encodes_the_real_vocabulary_exactly() -> None:
    pytest.importorskip("llama_cpp")
    from engine.models import LlamaModel

    model = LlamaModel(max_sequences=1, n_ctx=256)
    assert any(not p.isascii() for p in model.pieces)  # \\u escapes are exercised
    check(model, rows=1)  # the reference is slow on 49k entries
