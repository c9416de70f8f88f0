import pytest

from completions.client import BackendClient
from completions.errors import UpstreamError
from completions.schema import validate_params

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("mode", ["abort", "eof"])
def test_it_raises_after_the_tokens_that_arrived(scripted, mode):
    scripted.faults({"cut_after": 3, "cut_mode": mode})
    params = validate_params(
        {"model": "scripted", "prompt": "Hi", "max_tokens": 10, "stream": True}
    )
    received = []
    with BackendClient() as client, pytest.raises(UpstreamError) as caught:
        with client.stream(params) as chunks:
            for chunk in chunks:
                received.extend(c["text"] for c in chunk["choices"])
    assert caught.value.code == "stream_incomplete"
    assert caught.value.request_id.startswith("req-")
    assert len(received) == 3
