"""Token-view fixtures: the real SmolLM2 tokenizer's pieces for a text."""

from __future__ import annotations

import math

import pytest

from tests.loom.conftest import make_tree  # noqa: F401


@pytest.fixture(scope="session")
def smollm2():
    """The local engine's real model (loads in ~0.1 s), for its byte-level pieces."""
    from engine.models import LlamaModel

    return LlamaModel(n_threads=1)


def logprobs_for(pieces: list[str], probs: list[float]) -> dict:
    """A vLLM completion `logprobs` block for these pieces, each with one alternative."""
    return {
        "tokens": pieces,
        "token_logprobs": [math.log(p) for p in probs],
        "top_logprobs": [
            {piece: math.log(p), "<alt>": math.log((1 - p) / 2)}
            for piece, p in zip(pieces, probs, strict=True)
        ],
        "text_offset": [0] * len(pieces),
    }
