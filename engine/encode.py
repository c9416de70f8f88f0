"""JSON encoding of answers, fast enough for full-vocabulary prompt logprobs.

A full-vocabulary position is ~50k entries (~3 MB of JSON) and a prompt may have 1,024
of them. Per entry only the logprob and the rank vary, so every token's JSON around them
is built once per model (``"<id>":{"logprob":`` and ``,"decoded_token":"<piece>"}``),
the floats of a whole position are formatted by one orjson call on a numpy array, and a
position is one ``bytes.join`` of those pieces. The order is vLLM's: the actual token
first, then all tokens by rank.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson

from engine.generate import NEG_INF_LOGPROB
from engine.models import Model


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def fragment(text: str | bytes) -> orjson.Fragment:
    """Pre-serialised JSON to splice into an orjson document."""
    return orjson.Fragment(text)


class FullVocabEncoder:
    """Encodes full-vocabulary prompt_logprobs positions of one model."""

    def __init__(self, model: Model) -> None:
        vocab = model.vocab_size
        self.vocab = vocab
        self.ids = np.arange(vocab, dtype=np.int64)
        self.head = np.array([b'"%d":{"logprob":' % t for t in range(vocab)], dtype=object)
        self.tail = np.array(
            [b',"decoded_token":' + json.dumps(p).encode() + b"}," for p in model.pieces],
            dtype=object,
        )
        self.rank = np.array([b',"rank":%d' % r for r in range(vocab + 1)], dtype=object)

    def _order(self, row: np.ndarray) -> np.ndarray:
        """Token ids by descending logprob, ties by id: one integer sort of (value, id)
        keys, several times faster than a stable argsort of the floats."""
        bits = row.view(np.int32).astype(np.int64)
        ascending = np.where(bits < 0, bits ^ 0x7FFFFFFF, bits)  # float order as ints
        keys = ((-ascending) << 20) | self.ids
        return np.sort(keys) & 0xFFFFF

    def position(self, row: np.ndarray, actual: int) -> bytes:
        """One position's object, ``{...}``, for a float32 log-softmax row."""
        order = self._order(row)
        values = row[order]
        ranks = np.searchsorted(-values, -values, side="left") + 1
        at = int(np.flatnonzero(order == actual)[0])
        pick = np.concatenate(([at], np.arange(at), np.arange(at + 1, self.vocab)))
        order, values, ranks = order[pick], values[pick], ranks[pick]
        floats = orjson.dumps(
            np.maximum(values.astype(np.float64), NEG_INF_LOGPROB),
            option=orjson.OPT_SERIALIZE_NUMPY,
        )[1:-1].split(b",")
        parts = np.empty((self.vocab, 4), dtype=object)
        parts[:, 0] = self.head[order]
        parts[:, 1] = floats
        parts[:, 2] = self.rank[ranks]
        parts[:, 3] = self.tail[order]
        body = b"".join(parts.ravel().tolist())
        return b"{" + body[:-1] + b"}"


_encoders: dict[int, FullVocabEncoder] = {}


def full_vocab_encoder(model: Model) -> FullVocabEncoder:
    key = id(model)
    if key not in _encoders:
        _encoders[key] = FullVocabEncoder(model)
    return _encoders[key]
