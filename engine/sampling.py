"""Token sampling on raw logits with vLLM's semantics.

Order of operations follows vLLM's v1 sampler: penalties on the raw logits, then greedy
argmax (temperature 0), else temperature, min_p, top_k, top_p and a draw. Reported
logprobs come from the *raw* distribution (vLLM's default ``raw_logprobs`` mode), so they
are computed separately by :func:`log_softmax`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# vLLM treats temperatures below this as greedy.
GREEDY_EPS = 1e-5
# top_p first looks for its cut-off among this many best candidates: a full argsort of a
# 49k vocabulary costs milliseconds per token, the partial one a fraction of that.
_TOP_P_CANDIDATES = 1024


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_EPS

    @property
    def has_penalties(self) -> bool:
        return (
            self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
            or self.repetition_penalty != 1.0
        )


class PenaltyState:
    """Token history of one sample: prompt tokens (for repetition_penalty) and
    generated-token counts (for all three penalties)."""

    def __init__(self, vocab_size: int, prompt: list[int]) -> None:
        self.seen = np.zeros(vocab_size, dtype=bool)
        self.seen[np.asarray(prompt, dtype=np.int64)] = True
        self.counts = np.zeros(vocab_size, dtype=np.int32)

    def add(self, token: int) -> None:
        self.seen[token] = True
        self.counts[token] += 1


def apply_penalties(logits: np.ndarray, sp: SamplingParams, state: PenaltyState) -> np.ndarray:
    """vLLM's rule: repetition_penalty over prompt+output tokens (divide positive logits,
    multiply negative ones), then frequency and presence penalties over output tokens."""
    if not sp.has_penalties:
        return logits
    x = logits.astype(np.float32, copy=True)
    if sp.repetition_penalty != 1.0:
        idx = np.flatnonzero(state.seen)
        vals = x[idx]
        x[idx] = np.where(vals > 0, vals / sp.repetition_penalty, vals * sp.repetition_penalty)
    if sp.frequency_penalty != 0.0 or sp.presence_penalty != 0.0:
        idx = np.flatnonzero(state.counts)
        x[idx] -= sp.frequency_penalty * state.counts[idx] + sp.presence_penalty
    return x


def sample(
    logits: np.ndarray, sp: SamplingParams, rng: np.random.Generator, state: PenaltyState
) -> int:
    """Pick the next token id from one row of raw logits."""
    x = apply_penalties(logits, sp, state)
    if sp.greedy:
        return int(np.argmax(x))
    # Unnormalised probabilities with max 1: min_p's threshold "min_p * max_prob" is then
    # just min_p, and renormalising is left to the final draw. In place: this runs per token.
    p = np.multiply(x, np.float32(1.0 / sp.temperature), dtype=np.float32)
    np.subtract(p, p.max(), out=p)
    np.exp(p, out=p)
    ids: np.ndarray | None = None  # surviving candidates; None means all tokens
    if sp.min_p > 0.0:
        ids = np.flatnonzero(p >= sp.min_p)
    if sp.top_k > 0:
        vals = p if ids is None else p[ids]
        if sp.top_k < len(vals):
            kth = np.partition(vals, len(vals) - sp.top_k)[len(vals) - sp.top_k]
            keep = np.flatnonzero(vals >= kth)  # ties with the k-th value stay, as in vLLM
            ids = keep if ids is None else ids[keep]
    if sp.top_p < 1.0:
        ids = _top_p(p, np.arange(len(p)) if ids is None else ids, sp.top_p)
    weights = p if ids is None else p[ids]
    j = _draw(weights, rng.random())
    return int(j if ids is None else ids[j])


_BLOCK = 256


def _draw(weights: np.ndarray, u: float) -> int:
    """Inverse-CDF draw: the index where the running sum of weights passes u * total.

    Two levels (block sums, then one block) because a float64 cumsum over a 49k vocabulary
    costs ~0.8 ms per token on this class of machine; this costs ~0.05 ms.
    """
    n = len(weights)
    if n <= 4 * _BLOCK:
        cum = np.cumsum(weights, dtype=np.float64)
        return _last_positive(weights, int(np.searchsorted(cum, u * cum[-1], side="right")))
    blocks = -(-n // _BLOCK)
    if n == blocks * _BLOCK:
        padded = weights
    else:
        padded = np.zeros(blocks * _BLOCK, dtype=weights.dtype)
        padded[:n] = weights
    sums = padded.reshape(blocks, _BLOCK).sum(axis=1, dtype=np.float64)
    cum = np.cumsum(sums)
    target = u * cum[-1]
    b = min(int(np.searchsorted(cum, target, side="right")), blocks - 1)
    inner = np.cumsum(padded[b * _BLOCK : (b + 1) * _BLOCK], dtype=np.float64)
    j = int(np.searchsorted(inner, target - (cum[b] - sums[b]), side="right"))
    return _last_positive(weights, b * _BLOCK + min(j, _BLOCK - 1))


def _last_positive(weights: np.ndarray, j: int) -> int:
    """Rounding can land past the end or on a zero weight: step back to a real candidate."""
    j = min(j, len(weights) - 1)
    while j > 0 and weights[j] <= 0:
        j -= 1
    return j


def _top_p(p: np.ndarray, ids: np.ndarray, top_p: float) -> np.ndarray:
    """Keep a token when the mass of the tokens ranked above it is < top_p (vLLM masks
    ``cumsum_ascending <= 1 - top_p``, which is the same set)."""
    vals = p[ids]
    limit = top_p * float(vals.sum(dtype=np.float64))
    if len(vals) > _TOP_P_CANDIDATES:
        part = np.argpartition(vals, len(vals) - _TOP_P_CANDIDATES)[-_TOP_P_CANDIDATES:]
        order = part[np.argsort(-vals[part], kind="stable")]
        if float(vals[order].sum(dtype=np.float64)) < limit:
            order = np.argsort(-vals, kind="stable")
    else:
        order = np.argsort(-vals, kind="stable")
    sorted_vals = vals[order].astype(np.float64)
    before = np.cumsum(sorted_vals) - sorted_vals
    n_keep = max(1, int(np.count_nonzero(before < limit)))
    return ids[order[:n_keep]]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities along the last axis, in float32."""
    x = logits.astype(np.float32, copy=False)
    m = x.max(axis=-1, keepdims=True)
    z = np.log(np.exp(x - m).sum(axis=-1, keepdims=True, dtype=np.float64)).astype(np.float32)
    return x - m - z


def top_ids(logprobs: np.ndarray, k: int) -> np.ndarray:
    """Ids of the k best entries of a 1-d row, best first (ties: lower id first)."""
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if k >= len(logprobs):
        return np.argsort(-logprobs, kind="stable")
    part = np.argpartition(-logprobs, k - 1)[:k]
    return part[np.lexsort((part, -logprobs[part]))]


def rank_of(logprobs: np.ndarray, token: int) -> int:
    """vLLM's rank: 1 + number of tokens with a strictly higher logprob."""
    return int(np.count_nonzero(logprobs > logprobs[token])) + 1
