"""Parsing a /v1 body is bounded: nesting deeper than any request needs is a 400
`invalid_request` in the seed's envelope on both paths (in place, and in the parser's
child) — 5 KB of `[` was a 500 (RecursionError) — and the child has a memory and a CPU
limit and a timeout: a body past them is a 413, a stuck child is replaced (the body
waiting behind it is read by the next one), and the web process carries on."""

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from api import bodies
from api.errors import ApiError

pytestmark = pytest.mark.django_db(transaction=True)


def _post(base: str, secret: str, content: bytes) -> httpx.Response:
    return httpx.post(
        f"{base}/completions",
        content=content,
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        timeout=60,
    )


def _nested(depth: int) -> bytes:
    inner = "[" * depth + "]" * depth
    return json.dumps({"model": "llama-8b", "prompt": "x", "max_tokens": 1}).encode()[:-1] + (
        f', "stop": {inner}}}'.encode()
    )


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 5_000,  # read in place
        b"[" * 200_000,  # large: read by the child
        _nested(40),  # valid JSON, just too deep
        _nested(40) + b" " * bodies.BIG_BODY_BYTES,
    ],
    ids=["5KB-open", "200KB-open", "40-deep", "40-deep-large"],
)
def test_it_answers_a_deeply_nested_body_with_400(proxy, api_key, body):
    base, _ = proxy
    secret = api_key()
    answer = _post(base, secret, body)
    assert answer.status_code == 400, answer.text
    envelope = answer.json()
    assert envelope["error"]["code"] == "invalid_request"
    assert "deep" in envelope["error"]["message"] and envelope["request_id"]
    # The web process is fine: the next request is answered.
    fine = json.dumps({"model": "llama-8b", "prompt": "x", "max_tokens": 1}).encode()
    assert _post(base, secret, fine).status_code == 200


def _parse(raw: bytes):
    return asyncio.run(bodies.parse(raw, 64 * 1024 * 1024))


def _child() -> int:
    pool = bodies._pool
    assert pool is not None
    (pid,) = pool._processes  # type: ignore[attr-defined]
    return pid


def _limit(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith(name):
            return line.split()[len(name.split())]
    raise AssertionError(name)


@pytest.fixture
def fresh_parser():
    bodies.shutdown()
    yield
    bodies.shutdown()


def test_it_refuses_a_body_past_the_childs_memory(settings, fresh_parser):
    settings.WEFT_API_PARSER_MEMORY_BYTES = 64 * 1024 * 1024
    small = json.dumps({"prompt": "x" * bodies.BIG_BODY_BYTES}).encode()
    assert _parse(small)["prompt"].startswith("x")
    child = _child()
    assert _limit(child, "Max address space") != "unlimited"
    assert _limit(child, "Max cpu time") != "unlimited"
    # ~3 million empty lists: some 200 MB of Python objects from a 9 MB body.
    with pytest.raises(ApiError) as refused:
        _parse(b"[" + b"[]," * 3_000_000 + b"[]]")
    assert refused.value.code == "request_too_large"
    assert _parse(small)["prompt"].startswith("x")  # and the next body is read


def test_it_replaces_a_stuck_child_and_reads_the_body_in_the_next(settings, fresh_parser):
    settings.WEFT_API_PARSER_TIMEOUT_SECONDS = 4  # a new child starts well inside it
    small = json.dumps({"prompt": "y" * bodies.BIG_BODY_BYTES}).encode()
    assert _parse(small)["prompt"].startswith("y")
    stuck = _child()
    os.kill(stuck, signal.SIGSTOP)
    started = time.monotonic()
    try:
        assert _parse(small)["prompt"].startswith("y")
    finally:
        try:
            os.kill(stuck, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert 4 <= time.monotonic() - started < 20
    assert _child() != stuck
