"""One run against the real model (llama.cpp behind the engine), small max_tokens."""

import pytest

from completions import pipeline
from completions.client import forget_backend_cache
from engine.testing import run_engine

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(scope="module")
def llama_engine():
    with run_engine(backend="llama", max_logprobs=5) as base:
        yield base


def test_it_checkpoints_a_real_streamed_generation(
    llama_engine, settings, make_user, unconsumed_queue
):
    settings.WEFT_BACKEND_URL = f"{llama_engine}/v1"
    forget_backend_cache()
    user = make_user()
    generation = pipeline.start(
        user, {"prompt": "The capital of France is", "max_tokens": 8, "n": 2, "temperature": 0, "logprobs": 2},
        kind="workbench",
    )  # fmt: skip
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    assert generation.state == "done", generation.error_code
    first, second = generation.choices
    assert first["text"] and first["text"] == second["text"]  # greedy: both samples agree
    assert len(first["logprobs"]["tokens"]) == generation.usage["completion_tokens"] // 2 <= 8
    # The exact count from /tokenize was reserved; the backend's usage was charged.
    assert generation.prompt_tokens == generation.usage["prompt_tokens"]
    assert generation.charged_tokens == generation.usage["total_tokens"]
    assert generation.served_model
