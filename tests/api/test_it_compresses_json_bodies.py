"""Accept-Encoding: gzip compresses JSON bodies (a full-vocabulary body shrinks
several-fold, compressed as it passes through); without it, bodies go as they came."""

import gzip
import json

import httpx
import pytest

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": list(range(2, 82)), "max_tokens": 1, "prompt_logprobs": -1}


def raw_post(base: str, secret: str, encoding: str) -> httpx.Response:
    with httpx.Client(timeout=60) as client:
        request = client.build_request(
            "POST", f"{base}/completions", json=BODY,
            headers={"Authorization": f"Bearer {secret}", "Accept-Encoding": encoding},
        )  # fmt: skip
        response = client.send(request, stream=True)
        response.raw_bytes = b"".join(response.iter_raw())  # as sent, not decoded
        response.close()
        return response


def test_it_gzips_a_full_vocabulary_body(proxy, api_key):
    base, _ = proxy
    secret = api_key()
    zipped = raw_post(base, secret, "gzip, deflate")
    plain = raw_post(base, secret, "identity")
    assert zipped.status_code == plain.status_code == 200
    assert zipped.headers["content-encoding"] == "gzip"
    assert "content-encoding" not in plain.headers
    body = json.loads(gzip.decompress(zipped.raw_bytes))
    assert len(body["choices"][0]["prompt_logprobs"]) == 80
    assert len(zipped.raw_bytes) * 3 < len(plain.raw_bytes)
    assert json.loads(plain.raw_bytes)["usage"] == body["usage"]


def test_it_leaves_small_bodies_and_streams_uncompressed(proxy, api_key):
    base, _ = proxy
    secret = api_key()
    small = httpx.post(f"{base}/completions", headers={"Authorization": f"Bearer {secret}"},
                       json={"model": "llama-8b", "prompt": "Hi", "max_tokens": 1})  # fmt: skip
    assert small.status_code == 200 and "content-encoding" not in small.headers
    stream = httpx.post(f"{base}/completions", headers={"Authorization": f"Bearer {secret}"},
                        json={"model": "llama-8b", "prompt": "Hi", "max_tokens": 3,
                              "stream": True})  # fmt: skip
    assert "content-encoding" not in stream.headers
    assert stream.headers["content-type"].startswith("text/event-stream")
