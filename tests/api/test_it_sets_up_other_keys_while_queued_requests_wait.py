"""A request waiting in its key's queue holds no setup turn (api.turns) while it
waits: with as many requests queued as there are turns, another key's request is
still served at once, not after the queued ones' turn comes."""

import threading
import time

import httpx
import pytest

from api.turns import AT_ONCE

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Turn by turn", "max_tokens": 4}
ACTIVE = WAITING = 2  # limited_pair's per key


def post(base: str, secret: str, **extra) -> httpx.Response:
    return httpx.post(f"{base}/completions", json={**BODY, **extra},
                      headers={"Authorization": f"Bearer {secret}"}, timeout=60)  # fmt: skip


def test_it_serves_another_key_while_a_full_queue_waits(limited_pair, proxy, api_key):
    (a, _), _ = limited_pair
    _, backend = proxy
    keys = [api_key() for _ in range(-(-AT_ONCE // WAITING))]  # enough waiters for every turn
    slow = 1.0  # s per token: each active request runs ~4 s
    backend.faults(*[{"token_delay": slow}] * (ACTIVE * len(keys)))
    codes: list[int] = []

    def run(secret: str) -> None:
        codes.append(post(a, secret, stream=True).status_code)

    threads = [threading.Thread(target=run, args=(s,)) for s in keys for _ in range(ACTIVE)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # every key at its active limit
    waiters = [threading.Thread(target=run, args=(s,)) for s in keys for _ in range(WAITING)]
    for thread in waiters:
        thread.start()
    time.sleep(0.5)  # and every key's queue full
    started = time.monotonic()
    other = post(a, api_key())
    took = time.monotonic() - started
    assert other.status_code == 200, other.text
    assert took < 1.5, f"another key's request waited {took:.2f} s"  # the actives run ~3 s more
    for thread in threads + waiters:
        thread.join()
    assert codes == [200] * len(threads + waiters)
