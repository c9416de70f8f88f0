import pytest

from completions.client import BackendClient
from completions.schema import validate_params

pytestmark = pytest.mark.django_db


def test_it_sends_key_and_workload_and_keeps_request_id_and_model(scripted, settings):
    settings.WEFT_BACKEND_API_KEY = "sk-test-123"
    params = validate_params({"model": "scripted", "prompt": "Hi", "max_tokens": 2, "top_k": 5})
    with BackendClient("batch") as client:
        result = client.complete(params)
    sent = scripted.requests()[-1]
    assert sent["headers"]["authorization"] == "Bearer sk-test-123"
    assert sent["headers"]["x-acs-workload"] == "batch"
    # vLLM-native fields travel top-level, never under extra_body.
    assert sent["body"] == {
        "model": "scripted",
        "prompt": "Hi",
        "max_tokens": 2,
        "top_k": 5,
        "stream": False,
    }
    assert result.request_id.startswith("req-")
    assert result.model == "weft/scripted-tiny"  # the served checkpoint, not the short id


def test_it_streams_with_the_interactive_workload(scripted):
    params = validate_params({"model": "scripted", "prompt": "Hi", "max_tokens": 3, "stream": True})
    with BackendClient() as client, client.stream(params) as chunks:
        texts = [c["choices"][0]["text"] for c in chunks if c["choices"]]
        assert chunks.request_id.startswith("req-")
        assert chunks.model == "weft/scripted-tiny"
    assert len(texts) == 3
    assert scripted.requests()[-1]["headers"]["x-acs-workload"] == "interactive"
