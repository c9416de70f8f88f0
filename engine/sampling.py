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
    u = 0.0 if sp.greedy else rng.random()
    return int(sample_rows(logits[None, :], [sp], [u], [state])[0])


def sample_rows(
    logits: np.ndarray,
    sps: list[SamplingParams],
    us: list[float],
    states: list[PenaltyState | None],
) -> np.ndarray:
    """Pick one token per row of raw logits (rows x vocab), each row with its own
    parameters, uniform draw ``us[i]`` and penalty state.

    Vectorised over rows (a decode step samples every active sequence at once), and each
    row's result depends only on that row: a sample draws the same token whether it runs
    alone or beside others."""
    rows, vocab = logits.shape
    out = np.empty(rows, dtype=np.int64)
    x = logits
    for i, (sp, state) in enumerate(zip(sps, states, strict=True)):
        if state is not None and sp.has_penalties:
            if x is logits:
                x = logits.astype(np.float32, copy=True)
            x[i] = apply_penalties(logits[i], sp, state)
    greedy = np.array([sp.greedy for sp in sps])
    if greedy.any():
        out[greedy] = np.argmax(x[greedy], axis=1)
    todo = np.flatnonzero(~greedy)
    if not len(todo):
        return out
    params = [sps[i] for i in todo]
    # Unnormalised probabilities with max 1 per row: min_p's threshold "min_p * max_prob"
    # is then just min_p, and renormalising is left to the final draw.
    inv_t = np.array([1.0 / sp.temperature for sp in params], dtype=np.float32)
    p = np.multiply(x[todo], inv_t[:, None], dtype=np.float32)
    np.subtract(p, p.max(axis=1, keepdims=True), out=p)
    np.exp(p, out=p)
    min_p = np.array([sp.min_p for sp in params], dtype=np.float32)
    if (min_p > 0).any():
        p[p < min_p[:, None]] = 0.0
    for k in sorted({sp.top_k for sp in params if 0 < sp.top_k < vocab}):
        sel = np.flatnonzero([sp.top_k == k for sp in params])
        block = p[sel]
        kth = np.partition(block, vocab - k, axis=1)[:, vocab - k]
        block[block < kth[:, None]] = 0.0  # ties with the k-th value stay, as in vLLM
        p[sel] = block
    for j, sp in enumerate(params):
        if sp.top_p < 1.0:
            keep = _top_p(p[j], np.flatnonzero(p[j]), sp.top_p)
            row = np.zeros(vocab, dtype=np.float32)
            row[keep] = p[j, keep]
            p[j] = row
    u = np.array([us[i] for i in todo], dtype=np.float64)
    out[todo] = _draw_rows(p, u)
    return out


_BLOCK = 256


def _draw_rows(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw per row: the index where the running sum of weights passes
    u * total.

    Two levels (block sums, then one block) because a float64 cumsum over a 49k
    vocabulary costs ~0.8 ms per row on this class of machine; this costs a fraction."""
    rows, n = weights.shape
    blocks = -(-n // _BLOCK)
    if n == blocks * _BLOCK:
        padded = weights
    else:
        padded = np.zeros((rows, blocks * _BLOCK), dtype=weights.dtype)
        padded[:, :n] = weights
    cube = padded.reshape(rows, blocks, _BLOCK)
    sums = cube.sum(axis=2, dtype=np.float64)
    cum = np.cumsum(sums, axis=1)
    target = u * cum[:, -1]
    b = np.minimum((cum <= target[:, None]).sum(axis=1), blocks - 1)
    r = np.arange(rows)
    inner = np.cumsum(cube[r, b], axis=1, dtype=np.float64)
    rest = target - (cum[r, b] - sums[r, b])
    j = np.minimum((inner <= rest[:, None]).sum(axis=1), _BLOCK - 1)
    picks = b * _BLOCK + j
    for i in range(rows):
        picks[i] = _last_positive(weights[i], int(picks[i]))
    return picks


def _last_positive(weights: np.ndarray, j: int) -> int:
    """Rounding can land past the end or on a zero weight: step to a real candidate."""
    j = min(j, len(weights) - 1)
    while j > 0 and weights[j] <= 0:
        j -= 1
    while j < len(weights) - 1 and weights[j] <= 0:
        j += 1
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
