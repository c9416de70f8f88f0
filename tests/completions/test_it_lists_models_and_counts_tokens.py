import pytest

from completions.client import count_tokens, get_model, list_models, prompt_token_bound
from completions.errors import ModelNotFound

pytestmark = pytest.mark.django_db


def test_it_lists_models_with_capabilities_cached(scripted):
    models = list_models()
    assert [m.id for m in models] == ["scripted"]
    model = get_model(None)
    assert model.default and model.max_logprobs == 20 and model.full_vocab_max_prompt_tokens == 1024
    assert model.max_model_len == 2048
    get_model("scripted")
    assert len(scripted.requests("/v1/models")) == 1  # cached
    with pytest.raises(ModelNotFound):
        get_model("llama-405b")


def test_it_counts_tokens_exactly_via_tokenize(scripted):
    assert count_tokens("scripted", "Hi there") == [9]
    assert count_tokens("scripted", ["Hi", "Hi there"]) == [3, 9]
    assert count_tokens("scripted", [[1, 2, 3], [4]]) == [3, 1]
    sent = scripted.requests("/tokenize")
    assert sent and sent[0]["body"] == {"model": "scripted", "prompt": "Hi there"}


def test_it_falls_back_to_a_bound_that_is_never_too_low(scripted, settings):
    # A backend without /tokenize: point at a path that has none.
    settings.WEFT_BACKEND_URL = f"{scripted.base}/nowhere/v1"
    assert count_tokens("scripted", "Hi there") is None
    for text in ["Hi there", "", "héllo wörld ✓", "a" * 500]:
        settings.WEFT_BACKEND_URL = scripted.api
        exact = count_tokens("scripted", text)[0]
        assert prompt_token_bound(text) >= exact
