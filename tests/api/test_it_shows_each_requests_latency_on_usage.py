"""The Usage page's request rows say what their latency is: milliseconds (thousands
separated) for an answered request, "async job" for a 202 whose job runs on a worker,
"running" while in flight — never a blank cell."""

import re

import pytest

from api.models import ApiRequest

pytestmark = pytest.mark.django_db


def test_it_shows_each_requests_latency(client, make_key):
    key, _ = make_key(name="laptop")
    for request_id, status, latency in (("a", 200, 1234), ("b", 202, None), ("c", 0, None)):
        ApiRequest.objects.create(request_id=f"req-{request_id}", key=key, key_prefix=key.prefix,
                                  user=key.user, endpoint="/v1/completions", status=status,
                                  latency_ms=latency, prompt_tokens=12_345)  # fmt: skip
    client.force_login(key.user)
    page = client.get("/usage/").content.decode()
    cells = [re.sub(r"<[^>]+>|\s+", " ", c).strip()
             for c in re.findall(r"<td>\s*(?:\d[^<]*ms|<span[^>]*>[^<]*</span>|—)\s*</td>", page)]  # fmt: skip
    assert "1,234 ms" in cells and "async job" in cells and "running" in cells
    assert "12,345" in page
