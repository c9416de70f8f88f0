"""The sampler on hand-made logits: each parameter as vLLM defines it."""

from __future__ import annotations

from collections import Counter

import numpy as np

from engine.sampling import PenaltyState, SamplingParams, apply_penalties, log_softmax, sample

LOGITS = np.array([2.0, 1.0, 0.5, -1.0, 3.0, 0.0], dtype=np.float32)


def draws(sp: SamplingParams, count: int = 3000, state: PenaltyState | None = None) -> Counter[int]:
    rng = np.random.default_rng(0)
    state = state or PenaltyState(len(LOGITS), [])
    return Counter(sample(LOGITS, sp, rng, state) for _ in range(count))


def test_it_samples_greedily_at_temperature_zero() -> None:
    assert set(draws(SamplingParams(temperature=0.0), 50)) == {4}


def test_it_keeps_the_top_k() -> None:
    assert set(draws(SamplingParams(top_k=2))) == {0, 4}


def test_it_keeps_the_nucleus() -> None:
    probs = np.exp(log_softmax(LOGITS))  # sorted: 4 (.61), 0 (.22), 1 (.08) ...
    assert set(draws(SamplingParams(top_p=float(probs[4]) + 0.01))) == {0, 4}
    assert set(draws(SamplingParams(top_p=float(probs[4]) - 0.01))) == {4}


def test_it_keeps_tokens_above_min_p_of_the_top() -> None:
    # relative to the top token: e^(2-3)=.37, e^(1-3)=.14, e^(.5-3)=.08
    assert set(draws(SamplingParams(min_p=0.1))) == {0, 1, 4}


def test_it_matches_the_distribution_at_temperature() -> None:
    t = 2.0
    expected = np.exp(log_softmax(LOGITS / t))
    got = draws(SamplingParams(temperature=t), 6000)
    for token, p in enumerate(expected):
        assert abs(got[token] / 6000 - p) < 0.03


def test_it_applies_repetition_penalty_the_vllm_way() -> None:
    state = PenaltyState(len(LOGITS), [4, 3])  # a prompt token with positive and negative logit
    out = apply_penalties(LOGITS, SamplingParams(repetition_penalty=2.0), state)
    assert out[4] == 1.5 and out[3] == -2.0 and out[0] == 2.0


def test_it_applies_frequency_and_presence_to_generated_tokens_only() -> None:
    state = PenaltyState(len(LOGITS), [0])
    for token in (4, 4, 1):
        state.add(token)
    sp = SamplingParams(frequency_penalty=0.5, presence_penalty=0.25)
    out = apply_penalties(LOGITS, sp, state)
    assert out[4] == 3.0 - 2 * 0.5 - 0.25 and out[1] == 1.0 - 0.5 - 0.25 and out[0] == 2.0


def test_it_reproduces_draws_from_a_seed() -> None:
    def run(seed: int) -> list[int]:
        rng = np.random.default_rng(seed)
        state = PenaltyState(len(LOGITS), [])
        return [sample(LOGITS, SamplingParams(), rng, state) for _ in range(30)]

    assert run(1) == run(1) != run(2)
