import time

import pytest

from completions.client import BackendClient
from completions.errors import UpstreamTimeout
from completions.schema import validate_params

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("fault", [{"first_byte_delay": 3}, {"token_delay": 3}])
def test_it_raises_upstream_timeout_at_the_read_timeout(scripted, fault):
    scripted.faults(fault)
    params = validate_params({"model": "scripted", "prompt": "Hi", "max_tokens": 3, "stream": True})
    started = time.monotonic()
    with BackendClient(read_timeout=0.5) as client, pytest.raises(UpstreamTimeout) as caught:
        with client.stream(params) as chunks:
            list(chunks)
    assert caught.value.code == "timeout"
    assert time.monotonic() - started < 2.5
