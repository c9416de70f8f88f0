"""SIGKILL the web process right after a job was accepted, and again while a
long-poll waits on another: the worker runs both meanwhile; a new web process
harvests them, each charged once, and the long-poll's client simply polls again."""

import threading
import time

import httpx
import pytest

from completions.budget import key_summary
from completions.models import BudgetMonth, Generation
from tests.api.conftest import ASYNC, ProxyBackend, harvest_until
from tests.api.jobstack import JobStack

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def stack(django_db_setup, proxy_engine):
    with JobStack(proxy_engine) as stack:
        yield stack


def test_it_keeps_accepted_jobs_when_the_web_process_dies(stack, proxy_engine, make_key):
    backend = ProxyBackend(proxy_engine)
    backend.reset()
    key, secret = make_key()
    auth = {"Authorization": f"Bearer {secret}"}
    backend.faults({"first_byte_delay": 8}, {"first_byte_delay": 8})
    first = httpx.post(
        f"{stack.api}/completions", json={"model": "llama-8b", "prompt": [1], "max_tokens": 3},
        headers={**ASYNC, **auth},
    ).json()  # fmt: skip
    second = httpx.post(
        f"{stack.api}/completions", json={"model": "llama-8b", "prompt": [2], "max_tokens": 3},
        headers={**ASYNC, **auth},
    ).json()  # fmt: skip
    stack.kill(stack.web)  # right after the 202s

    stack.start_web()
    broken: list[object] = []

    def wait() -> None:
        try:
            got = httpx.get(f"{stack.api}/harvest/{second['id']}", params={"wait": "20"},
                            headers=auth, timeout=30)  # fmt: skip
            broken.append((got.status_code, got.text, time.monotonic() - t0))
        except httpx.HTTPError as exc:
            broken.append(exc)

    t0 = time.monotonic()
    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.5)
    stack.kill(stack.web)  # mid long-poll
    waiter.join(30)
    assert broken and isinstance(broken[0], httpx.HTTPError), broken  # its connection went

    stack.start_web()
    http = httpx.Client(base_url=stack.api, headers=auth, timeout=30)
    for job in (first, second):
        done = harvest_until(http, f"/harvest/{job['id']}", {"succeeded", "failed"}, timeout=60)
        assert done["status"] == "succeeded", done
        assert Generation.objects.filter(kind="job").get(public_id=job["id"]).attempts == 1
    charged = sum(
        Generation.objects.filter(kind="job")
        .filter(key=key)
        .values_list("charged_tokens", flat=True)
    )
    month = BudgetMonth.objects.get(account=f"key:{key.pk}")
    assert (month.used, month.reserved) == (charged, 0)
    assert key_summary(key)["reserved"] == 0
