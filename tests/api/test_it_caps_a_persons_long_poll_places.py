"""Long-poll places are capped per person as well as per key: a person already waiting
on one long-poll (PERSON_ENV: 1 per person; each key may hold 64) is answered at once
with `X-Acs-Longpoll: declined` and Retry-After on another key, while another person's
long-poll waits as asked."""

import threading
import time

import pytest

from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Wait for it", "max_tokens": 4}


def test_it_declines_a_person_past_the_cap_and_waits_for_another(person_api, person_keys):
    api, backend = person_api
    a1, a2 = person_keys(api, 2)
    (b,) = person_keys(api, 1)
    backend.faults(*[{"token_delay": 0.5}] * 3)  # each job runs ~2 s
    jobs = {name: c.post("/completions", json=BODY, headers=ASYNC).json()["id"]
            for name, c in (("a1", a1), ("a2", a2), ("b", b))}  # fmt: skip
    holding: dict = {}
    holder = threading.Thread(target=lambda: holding.update(
        answer=a1.get(f"/harvest/{jobs['a1']}", params={"wait": "10"})))  # fmt: skip
    holder.start()
    time.sleep(0.3)  # a1's long-poll holds the person's one place

    started = time.monotonic()
    declined = a2.get(f"/harvest/{jobs['a2']}", params={"wait": "10"})
    assert declined.status_code == 200
    assert declined.headers.get("x-acs-longpoll") == "declined"
    assert declined.headers["retry-after"] == "1"
    assert time.monotonic() - started < 1.0

    waited = b.get(f"/harvest/{jobs['b']}", params={"wait": "10"})
    assert "x-acs-longpoll" not in waited.headers
    assert waited.json()["status"] == "succeeded"  # it waited until the end
    holder.join()
    assert "x-acs-longpoll" not in holding["answer"].headers
    harvest_until(a2, f"/harvest/{jobs['a2']}", {"succeeded"})
