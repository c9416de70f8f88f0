"""Two real backends at once: the local engine (SmolLM2 on llama.cpp) and a scripted
engine behind the alias "tiny"; the door sends each request to its model's backend."""

import httpx
import pytest

from completions.client import (
    BackendClient,
    count_tokens,
    get_model,
    list_models,
    route,
)
from completions.schema import validate_params
from tests.api.conftest import scripted_received

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_it_lists_every_backends_models_under_short_ids_with_one_default(two_backends):
    models = list_models()
    assert [m.id for m in models] == ["smollm2-135m", "tiny"]
    local, tiny = models
    assert local.root == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert tiny.root == "weft/scripted-tiny"  # the checkpoint, as the backend says
    assert tiny.max_model_len == 2048 and tiny.max_logprobs == 20
    # Both engines flag their model default; the first backend's wins.
    assert [m.default for m in models] == [True, False]
    assert get_model(None).id == "smollm2-135m"


def test_it_makes_the_configured_model_the_default(two_backends, settings):
    settings.WEFT_DEFAULT_MODEL = "tiny"
    assert [m.id for m in list_models() if m.default] == ["tiny"]
    assert get_model(None).id == "tiny"
    assert route(None).backend.name == "scripted"
    with BackendClient() as client:
        served = client.complete(validate_params({"prompt": "Hi", "max_tokens": 2}))
    assert served.model == "weft/scripted-tiny"
    assert scripted_received(two_backends)[-1]["body"]["model"] == "scripted"


def test_it_sends_a_door_call_to_each_backend_with_its_own_name_and_key(two_backends):
    with BackendClient() as client:
        tiny = client.complete(validate_params({"model": "tiny", "prompt": "Hi", "max_tokens": 3}))
        local = client.complete(
            validate_params(
                {"model": "smollm2-135m", "prompt": "The capital of France is", "max_tokens": 3}
            )
        )
    assert tiny.model == "weft/scripted-tiny"
    assert local.model == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert local.usage["completion_tokens"] >= 1
    sent = scripted_received(two_backends)
    assert len(sent) == 1  # the local engine's call never reached the scripted one
    assert sent[0]["body"]["model"] == "scripted"  # the backend's own name, not the alias
    assert sent[0]["headers"]["authorization"] == "Bearer sk-scripted"


def test_it_streams_from_each_backend(two_backends):
    def stream(model: str) -> tuple[str, str]:
        params = validate_params(
            {"model": model, "prompt": "Once upon a time", "max_tokens": 3, "stream": True}
        )
        with BackendClient() as client, client.stream(params) as chunks:
            text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
            return text, chunks.model

    (tiny_text, tiny_model), (local_text, local_model) = stream("tiny"), stream("smollm2-135m")
    assert tiny_model == "weft/scripted-tiny" and tiny_text
    assert local_model == "HuggingFaceTB/SmolLM2-135M-Instruct" and local_text
    assert [r["body"]["model"] for r in scripted_received(two_backends)] == ["scripted"]


def test_it_counts_tokens_with_each_models_own_tokenizer(two_backends, local_engine):
    text = "The capital of France is"

    def direct(base: str, model: str) -> int:
        return httpx.post(f"{base}/tokenize", json={"model": model, "prompt": text}).json()["count"]

    tiny, local = direct(two_backends, "scripted"), direct(local_engine, "smollm2-135m")
    assert tiny != local  # two different tokenizers, so the test can tell them apart
    assert count_tokens("tiny", text) == [tiny]
    assert count_tokens("smollm2-135m", text) == [local]
    tokenized = scripted_received(two_backends, "/tokenize")
    assert [r["body"]["model"] for r in tokenized] == ["scripted", "scripted"]
