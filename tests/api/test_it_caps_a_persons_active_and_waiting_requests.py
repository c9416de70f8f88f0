"""Active and waiting requests are capped per person as well as per key: a person with
three keys, at their 2 active + 1 waiting (PERSON_ENV; each key's own cap is 16 + 64),
is refused 429 queue_full with Retry-After on any key — while another person, at the
same moment, is served at once."""

import threading
import time

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Slowly now", "max_tokens": 4, "stream": True}


def test_it_refuses_a_person_at_the_cap_and_serves_another(person_api, person_keys):
    api, backend = person_api
    a1, a2, a3 = person_keys(api, 3)
    (b,) = person_keys(api, 1)
    backend.faults(*[{"token_delay": 0.4}] * 2)  # the two active take ~1.6 s
    results: dict = {}

    def run(name, client):
        results[name] = client.post("/completions", json=BODY)
        results[name + "_at"] = time.monotonic()

    threads = []
    for name, client in (("active1", a1), ("active2", a2), ("waiting", a3)):
        threads.append(threading.Thread(target=run, args=(name, client)))
        threads[-1].start()
        time.sleep(0.2)

    full = a3.post("/completions", json=BODY)
    assert full.status_code == 429, full.text
    error = full.json()["error"]
    assert error["code"] == "queue_full"
    assert "your keys together" in error["message"]
    assert full.headers["retry-after"] == "1"
    assert full.json()["request_id"] == full.headers["x-request-id"]

    started = time.monotonic()
    other = b.post("/completions", json={**BODY, "stream": False})
    assert other.status_code == 200, other.text
    assert time.monotonic() - started < 1.0  # not behind the first person's requests

    for thread in threads:
        thread.join()
    assert [results[n].status_code for n in ("active1", "active2", "waiting")] == [200] * 3
    assert results["waiting_at"] > min(results["active1_at"], results["active2_at"])
