"""A full-vocabulary body (tens of MB) passes through the proxy chunk by chunk: the web
process never holds it whole, gzipped or not."""

import gzip
import json

import httpx
import pytest

from tests.support import Supervisor, free_port, start_web

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": [2 + i % 600 for i in range(1000)], "max_tokens": 1,
        "prompt_logprobs": -1}  # fmt: skip


def peak_rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_it_never_holds_the_body(proxy_engine, api_key):
    from tests.api.conftest import proxy_env_for

    sup = Supervisor()
    try:
        base = start_web(sup, proxy_env_for(proxy_engine), free_port()) + "/v1"
        [(_, web, _)] = sup.children
        auth = {"Authorization": f"Bearer {api_key()}"}
        warm = httpx.post(f"{base}/completions", json={**BODY, "prompt": [2, 3]}, headers=auth)
        assert warm.status_code == 200
        before = peak_rss_kib(web.pid)
        sizes = {}
        for encoding in ("identity", "gzip"):
            with httpx.stream("POST", f"{base}/completions", json=BODY, timeout=120,
                              headers={**auth, "Accept-Encoding": encoding}) as response:  # fmt: skip
                assert response.status_code == 200
                raw = b"".join(response.iter_raw())
            sizes[encoding] = len(raw)
            text = gzip.decompress(raw) if encoding == "gzip" else raw
            assert len(json.loads(text)["choices"][0]["prompt_logprobs"]) == 1000
        grown_mib = (peak_rss_kib(web.pid) - before) / 1024
        body_mib = sizes["identity"] / 2**20
        assert body_mib > 20
        assert grown_mib < body_mib / 4, (grown_mib, body_mib)
    finally:
        sup.stop_all()
