"""JSON encoding of answers, fast enough for full-vocabulary prompt logprobs.

A full-vocabulary position is ~50k entries (~4 MB of JSON) and a prompt may have 1,024
of them. Each entry is ``"<id>":{"logprob":<float>,"rank":<rank>,"decoded_token":<piece>},``:
everything but the float depends only on the token or the rank, so it is built once per
model as rows of fixed-width byte matrices, NUL-padded (JSON text never holds a raw NUL).
A position is then numpy work that releases the GIL, so spans encode on two threads
and beside the event loop: the sort by rank, one orjson call for all the floats (each
float's field takes the comma after it, which the rank's field would start with), row
gathers into one (entries x width) matrix, and dropping the NULs. The order is vLLM's:
the actual token first, then all tokens by rank.
"""

from __future__ import annotations

import json
import threading
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


def _fixed(strings: list[bytes]) -> np.ndarray:
    """Byte strings as the rows of a NUL-padded uint8 matrix."""
    width = max(len(b) for b in strings)
    return np.array(strings, dtype=f"S{width}").view(np.uint8).reshape(len(strings), width)


class FullVocabEncoder:
    """Encodes full-vocabulary prompt_logprobs positions of one model."""

    def __init__(self, model: Model) -> None:
        vocab = model.vocab_size
        self.vocab = vocab
        self.ids = np.arange(vocab, dtype=np.int64)
        self.head = _fixed([b'"%d":{"logprob":' % t for t in range(vocab)])
        self.rank = _fixed([b'"rank":%d' % r for r in range(vocab + 1)])
        pieces = [json.dumps(p).encode() for p in model.pieces]
        assert not any(b"\0" in p for p in pieces)  # NUL is the padding
        self.tail = _fixed([b',"decoded_token":' + p + b"}," for p in pieces])
        self._buffers = threading.local()

    def _order(self, row: np.ndarray) -> np.ndarray:
        """Token ids by descending logprob, ties by id: one integer sort of (value, id)
        keys, several times faster than a stable argsort of the floats."""
        bits = row.view(np.int32).astype(np.int64)
        ascending = np.where(bits < 0, bits ^ 0x7FFFFFFF, bits)  # float order as ints
        keys = ((-ascending) << 20) | self.ids
        return np.sort(keys) & 0xFFFFF

    def _matrix(self, width: int) -> np.ndarray:
        """This thread's (vocab x width) scratch matrix, zeroed, reused across positions."""
        buf = getattr(self._buffers, "buf", None)
        size = self.vocab * width
        if buf is None or buf.size < size:
            buf = self._buffers.buf = np.empty(size, dtype=np.uint8)
        matrix = buf[:size].reshape(self.vocab, width)
        matrix.fill(0)
        return matrix

    def entries(self, row: np.ndarray, actual: int) -> np.ndarray:
        """One position's entries, comma-separated with a trailing comma, as uint8
        (the object is ``{`` + this without its last byte + ``}``), for a float32
        log-softmax row."""
        vocab = self.vocab
        order = self._order(row)
        values = row[order]
        ranks = np.searchsorted(-values, -values, side="left") + 1
        at = int(np.flatnonzero(order == actual)[0])
        pick = np.concatenate(([at], np.arange(at), np.arange(at + 1, vocab)))
        order, values, ranks = order[pick], values[pick], ranks[pick]
        floats = orjson.dumps(
            np.maximum(values.astype(np.float64), NEG_INF_LOGPROB),
            option=orjson.OPT_SERIALIZE_NUMPY,
        )
        text = np.frombuffer(floats, dtype=np.uint8)[1:].copy()
        text[-1] = ord(",")  # "]": the last float gets its comma too
        ends = np.flatnonzero(text == ord(",")) + 1
        starts = np.concatenate(([0], ends[:-1]))
        lengths = ends - starts
        head, rank, tail = self.head.shape[1], self.rank.shape[1], self.tail.shape[1]
        float_width = int(lengths.max())
        width = head + float_width + rank + tail
        matrix = self._matrix(width)
        # Each float's bytes to its own row, just after the head columns.
        to = np.repeat(np.arange(vocab) * width + head - starts, lengths)
        to += np.arange(text.size)
        matrix.reshape(-1)[to] = text
        at_rank = head + float_width
        # Written in place (mode "clip" lets take write to a strided view unbuffered).
        np.take(self.head, order, axis=0, out=matrix[:, :head], mode="clip")
        np.take(self.rank, ranks, axis=0, out=matrix[:, at_rank : at_rank + rank], mode="clip")
        np.take(self.tail, order, axis=0, out=matrix[:, at_rank + rank :], mode="clip")
        flat = matrix.reshape(-1)
        return flat[flat != 0]

    def position(self, row: np.ndarray, actual: int) -> bytes:
        """One position's object, ``{...}``."""
        return b"".join((b"{", memoryview(self.entries(row, actual))[:-1], b"}"))

    def positions(self, rows: list[tuple[np.ndarray, int]]) -> bytes:
        """Several positions, each preceded by a comma: ``,{...},{...}``."""
        parts: list[Any] = []
        for row, actual in rows:
            parts += (b",{", memoryview(self.entries(row, actual))[:-1], b"}")
        return b"".join(parts)


_encoders: dict[int, FullVocabEncoder] = {}


def full_vocab_encoder(model: Model) -> FullVocabEncoder:
    key = id(model)
    if key not in _encoders:
        _encoders[key] = FullVocabEncoder(model)
    return _encoders[key]
