"""Reading a full-vocabulary answer (prompt_logprobs=-1) one position at a time.

At 1,024 prompt tokens over a 49,152-token vocabulary the JSON body is ~3.9 GB;
parsed whole it was ~18 GB of Python objects in the web process, and stored it
broke Postgres's jsonb limit past ~70 positions. Here the body is read from the
HTTP response as it arrives (ijson's C parser builds one position's dict, then
drops it), and each position is reduced at once to what the page shows: the
actual token with its exact rank, the entropy of the whole distribution, and
the FULL_VOCAB_SHOWN best alternatives. Memory is one position, not the body.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import ijson
import numpy as np

from completions.client import BackendClient, Completion
from completions.errors import UpstreamError, error_from_envelope
from completions.schema import CompletionParams
from inspector.scoring import FULL_VOCAB_SHOWN, LN2

POSITIONS = "choices.item.prompt_logprobs.item"
CHUNK = 256 * 1024
EDGE = 64 * 1024  # bytes kept of the body's start and end, for its small fields


class _Reader:
    """A file-like view of the response's byte stream for ijson, remembering the
    first and last EDGE bytes (id, model and usage live outside the positions)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""
        self.head = b""
        self.tail = b""
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        while len(self._buffer) < max(n, 1):
            chunk = next(self._chunks, b"")
            if not chunk:
                break
            self.size += len(chunk)
            if len(self.head) < EDGE:
                self.head += chunk[: EDGE - len(self.head)]
            self.tail = (self.tail + chunk)[-EDGE:]
            self._buffer += chunk
        if n < 0:
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out


def summarise(entries: dict[str, Any], actual_id: int | None) -> tuple[dict, dict]:
    """One position's whole distribution -> (the entries worth keeping, stats).

    Kept: the actual token (vLLM puts it first; or the id the prompt had) with its
    exact rank, and the FULL_VOCAB_SHOWN most likely tokens. Stats: the entropy in
    bits (renormalised, as scoring.entropy_bits) and the exact rank."""
    keys = list(entries)
    actual = str(actual_id) if actual_id is not None and str(actual_id) in entries else keys[0]
    lps = np.fromiter((float(e["logprob"]) for e in entries.values()), float, len(keys))
    mine = float(entries[actual]["logprob"])
    top = lps.max()
    weights = np.exp(lps - top)
    p = weights / weights.sum()
    nonzero = p[p > 0]
    entropy = float(-(nonzero * np.log(nonzero)).sum() / LN2)
    rank = int((lps > mine).sum()) + 1
    best = np.argsort(-lps, kind="stable")[:FULL_VOCAB_SHOWN]
    kept = {actual: {**_clean(entries[actual]), "rank": rank}}
    for i in best:
        key = keys[int(i)]
        if key not in kept:
            kept[key] = _clean(entries[key])
    return kept, {"entropy_bits": entropy, "rank": rank}


def _clean(entry: dict[str, Any]) -> dict[str, Any]:
    # Postgres jsonb cannot hold U+0000, and byte 0 is a token of every byte-level
    # vocabulary: the door's parse_json makes it U+FFFD, and so does this reader.
    token = entry.get("decoded_token")
    out = {"logprob": float(entry["logprob"]), "rank": entry.get("rank")}
    out["decoded_token"] = token.replace("\x00", "\ufffd") if isinstance(token, str) else token
    return out


def _field(edge: bytes, name: str, *, last: bool = False) -> Any:
    """A top-level field's value found in the body's first or last bytes."""
    marks = [m.end() for m in re.finditer(rb'"' + name.encode() + rb'"\s*:\s*', edge)]
    if not marks:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(
            edge[marks[-1] if last else marks[0] :].decode("utf-8", "replace")
        )
    except ValueError:
        return None
    return value


def complete(
    client: BackendClient, params: CompletionParams, *, actual_ids: list[int] | None = None
) -> Completion:
    """Send a full-vocabulary scoring request through the door and read its
    answer incrementally (the `complete` hook of completions.pipeline.run_now).
    `actual_ids` are the prompt's token ids when known (from /tokenize)."""
    with client.stream_raw(params) as response:
        request_id = response.headers.get("x-request-id", "")
        reader = _Reader(response.iter_bytes(CHUNK))
        positions: list[Any] = []
        stats: list[Any] = []
        try:
            for entries in ijson.items(reader, POSITIONS, use_float=True):
                i = len(positions)
                if not entries:
                    positions.append(None)
                    stats.append(None)
                    continue
                actual = actual_ids[i] if actual_ids and i < len(actual_ids) else None
                kept, stat = summarise(entries, actual)
                positions.append(kept)
                stats.append(stat)
        except httpx.HTTPError as exc:
            raise UpstreamError(
                "stream_incomplete",
                f"the connection broke: {type(exc).__name__}",
                None,
                request_id,
            ) from exc
        except (ijson.JSONError, ValueError, KeyError, TypeError) as exc:
            if reader.head.lstrip().startswith(b'{"error"'):
                raise error_from_envelope(500, _whole(reader), {}, request_id=request_id) from None
            raise UpstreamError(
                "bad_response",
                f"the backend's full-vocabulary answer could not be read ({type(exc).__name__})",
                response.status_code,
                request_id,
            ) from None
    if not positions:
        if reader.head.lstrip().startswith(b'{"error"'):
            raise error_from_envelope(500, _whole(reader), {}, request_id=request_id)
        raise UpstreamError("bad_response", "the answer holds no prompt_logprobs", 200, request_id)
    usage = _field(reader.tail, "usage", last=True)
    model = _field(reader.head, "model")
    model_id = model if isinstance(model, str) else ""
    body: dict[str, Any] = {
        "model": model_id,
        "usage": usage if isinstance(usage, dict) else None,
        "choices": [
            {
                "index": 0,
                "text": "",
                "finish_reason": "length",
                "prompt_logprobs": positions,
                "prompt_stats": stats,
            }
        ],
    }
    return Completion(body, request_id, model_id, None)


def _whole(reader: _Reader) -> Any:
    try:
        return json.loads(reader.head)
    except ValueError:
        return None
