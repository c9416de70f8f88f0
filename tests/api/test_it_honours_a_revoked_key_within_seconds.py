"""A revoked key stops working in every web process within WEFT_API_KEY_CACHE_SECONDS
(each process keeps looked-up keys that long)."""

import httpx
import pytest

from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_honours_a_revoked_key_within_the_cache_bound(proxy, make_key):
    base, _ = proxy
    key, secret = make_key()
    auth = {"Authorization": f"Bearer {secret}"}
    body = {"model": "llama-8b", "prompt": "Hi", "max_tokens": 1}
    assert httpx.post(f"{base}/completions", json=body, headers=auth).status_code == 200
    key.revoke()
    refused = wait_until(
        lambda: httpx.post(f"{base}/completions", json=body, headers=auth).status_code == 401,
        7, "revocation (WEFT_API_KEY_CACHE_SECONDS=5)", interval=0.5,
    )  # fmt: skip
    assert refused
