"""Per-key limits hold across web processes (their state is in Redis): active +
waiting in order, then 429 queue_full; starts per minute, then 429 rate_limited; and a
process that dies mid-request gives its slots back when its leases expire."""

import threading
import time

import httpx
import pytest

from tests.support import Supervisor, free_port, start_web

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Slowly now", "max_tokens": 4}


def post(base: str, secret: str, **extra) -> httpx.Response:
    return httpx.post(f"{base}/completions", json={**BODY, **extra},
                      headers={"Authorization": f"Bearer {secret}"}, timeout=60)  # fmt: skip


def in_background(results: dict, name: str, base: str, secret: str) -> threading.Thread:
    def run():
        try:  # streamed: a queued request has no request window to run out of
            results[name] = post(base, secret, stream=True)
        except httpx.HTTPError as exc:  # the killed server's requests
            results[name] = exc
        results[name + "_at"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_it_queues_in_order_then_answers_queue_full(limited_pair, proxy, api_key):
    (a, b), _ = limited_pair
    _, backend = proxy
    secret = api_key()
    backend.faults(*[{"token_delay": 0.4}] * 4)  # each of the 4 admitted takes ~1.6 s
    results: dict = {}
    threads = [in_background(results, "active1", a, secret)]
    time.sleep(0.2)
    threads.append(in_background(results, "active2", b, secret))
    time.sleep(0.2)
    threads.append(in_background(results, "waiting1", a, secret))
    time.sleep(0.2)
    threads.append(in_background(results, "waiting2", b, secret))
    time.sleep(0.2)
    full = post(a, secret)
    assert full.status_code == 429, full.text
    assert full.json()["error"]["code"] == "queue_full"
    assert full.headers["retry-after"] == "1"
    for thread in threads:
        thread.join()
    assert [results[n].status_code for n in ("active1", "active2", "waiting1", "waiting2")] == [
        200
    ] * 4
    assert results["waiting1_at"] < results["waiting2_at"]  # in arrival order
    assert post(b, secret).status_code == 200  # every slot came back


def test_it_answers_rate_limited_past_the_starts_per_minute(limited_pair, api_key):
    (a, b), _ = limited_pair
    secret = api_key()
    codes = [post(a if i % 2 else b, secret).status_code for i in range(8)]
    assert codes == [200] * 8
    # Invalid requests count as well: the 9th start of any kind is refused.
    limited = post(a, secret, temperature=500)
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["retry-after"]) <= 60


def test_it_frees_the_slots_of_a_process_that_died(limited_pair, proxy, api_key):
    (_, b), env = limited_pair
    _, backend = proxy
    secret = api_key()
    sup = Supervisor()
    doomed = start_web(sup, env, free_port()) + "/v1"
    [(_, victim, _)] = sup.children
    try:
        backend.faults({"token_delay": 1.0}, {"token_delay": 1.0})
        results: dict = {}
        in_background(results, "one", doomed, secret)
        in_background(results, "two", doomed, secret)
        time.sleep(0.8)  # both hold the key's two active slots
        victim.kill()  # SIGKILL: no chance to release anything
        started = time.monotonic()
        after = post(b, secret)
        waited = time.monotonic() - started
        assert after.status_code == 200
        assert 0.5 < waited < 15  # it waited for the dead leases to expire, then ran
    finally:
        sup.stop_all()
