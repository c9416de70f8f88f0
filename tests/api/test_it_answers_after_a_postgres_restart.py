"""/v1 survives a database restart: Postgres is restarted under a running web process
(and worker), and the next /v1 requests — a key looked up again, a synchronous
completion (its reservation and settle), a job submitted and harvested, the models
listing — all answer normally, without restarting Weft. (The /v1 path is served before
Django, whose request cycle would replace a dead connection; api.db and the ledger's
pool do it there.)"""

import re
import time

import httpx
import pytest

from launch.commands import manage
from tests.api.conftest import ASYNC, harvest_until
from tests.faultstack import running_stack
from tests.support import wait_until

BODY = {"model": "scripted", "prompt": "After the restart", "max_tokens": 4}


@pytest.fixture(scope="module")
def stack():
    with running_stack(
        WEFT_GENERATION_QUEUE="pg-restart",
        WEFT_API_KEY_CACHE_SECONDS="0.5",  # the key is looked up again after the restart
        WEFT_GENERATION_STALE_SECONDS="5",
    ) as stack:
        yield stack


def every_route(http: httpx.Client) -> list[int]:
    sync = http.post("/completions", json=BODY)
    job = http.post("/completions", json=BODY, headers=ASYNC)
    done = harvest_until(http, f"/harvest/{job.json()['id']}", {"succeeded", "failed"})
    models = http.get("/models")
    assert done["status"] == "succeeded", done
    return [sync.status_code, job.status_code, models.status_code]


def test_it_answers_every_v1_route_after_postgres_restarts(stack):
    made = manage(stack.env, "weft_api_key", "create", stack.username, capture=True)
    secret = made.strip().splitlines()[-1]
    assert re.fullmatch(r"weft-[0-9a-f]{8}\.\S+", secret)
    http = httpx.Client(base_url=f"{stack.url}/v1", timeout=30,
                        headers={"Authorization": f"Bearer {secret}"})  # fmt: skip
    assert every_route(http) == [200, 202, 200]  # every connection is open and warm

    stack.restart("postgres")
    time.sleep(1.0)  # past the key cache: the next request looks the key up in Postgres

    assert every_route(http) == [200, 202, 200]
    assert every_route(http) == [200, 202, 200]

    def balanced() -> bool:
        with stack.db() as conn:
            (reserved,) = conn.execute(
                "SELECT sum(reserved) FROM completions_budgetmonth"
            ).fetchone()
            (unsettled,) = conn.execute(
                "SELECT count(*) FROM api_apirequest WHERE NOT settled"
            ).fetchone()
        return (reserved, unsettled) == (0, 0)

    wait_until(balanced, 10, "every reservation settled")
