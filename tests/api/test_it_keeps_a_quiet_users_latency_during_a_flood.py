"""One user floods the service with API jobs; another user's job and page run keep their
latency. Real processes: the ASGI server, the two worker pools of `make run` (each its
own Celery worker: interactive and bulk, two threads each) and the scripted engine
generating 100 tokens a second per sequence.

The flood is 40 jobs of 40 tokens (0.4 s each): arrival order through the bulk pool's
two threads would put a job sent after it ~8 s back. Owners take turns instead, so the
quiet user's job starts as soon as a thread frees (≤ one flood job), and the quiet
user's page run, on the interactive pool, never waits behind the flood at all. The
flood still all runs."""

import time

import httpx
import pytest

from completions import pipeline
from completions.client import forget_backend_cache
from completions.models import Generation
from engine.testing import run_engine
from tests.api.conftest import ASYNC, harvest_until
from tests.support import Supervisor, child_env, free_port, start_web, start_worker, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

FLOOD, FLOOD_TOKENS, QUIET_TOKENS = 40, 40, 8


@pytest.fixture(scope="module")
def pools(django_db_setup, tmp_path_factory):
    from django.conf import settings

    sup = Supervisor()
    logs = tmp_path_factory.mktemp("fair")
    prefix = f"fair-{free_port()}"
    try:
        with run_engine("scripted", token_delay=0.01) as engine:
            env = child_env(
                settings.DATABASES["default"]["NAME"],
                WEFT_BACKEND_URL=f"{engine}/v1",
                WEFT_GENERATION_QUEUE=prefix,
                WEFT_API_MAX_ACTIVE="64",
            )
            url = start_web(sup, env, free_port())
            start_worker(sup, env, logs / "interactive.log", 2, pools=("interactive",))
            start_worker(sup, env, logs / "bulk.log", 2, pools=("bulk",))
            yield {"api": f"{url}/v1", "engine": engine, "prefix": prefix}
    finally:
        sup.stop_all()


def job(http: httpx.Client, tokens: int, prompt: str) -> dict:
    body = {"model": "scripted", "prompt": prompt, "max_tokens": tokens}
    answer = http.post("/completions", json=body, headers=ASYNC)
    assert answer.status_code == 202, answer.text
    return answer.json()


def test_it_serves_the_quiet_user_between_the_flooders_jobs(pools, make_user, make_key, settings):
    settings.WEFT_BACKEND_URL = f"{pools['engine']}/v1"
    settings.WEFT_GENERATION_QUEUE = pools["prefix"]
    forget_backend_cache()
    _, loud_secret = make_key()
    quiet_user = make_user()
    _, quiet_secret = make_key(user=quiet_user)
    loud = httpx.Client(base_url=pools["api"], timeout=30,
                        headers={"Authorization": f"Bearer {loud_secret}"})  # fmt: skip
    quiet = httpx.Client(base_url=pools["api"], timeout=30,
                         headers={"Authorization": f"Bearer {quiet_secret}"})  # fmt: skip

    flood = [job(loud, FLOOD_TOKENS, f"Flood {i}") for i in range(FLOOD)]
    sent = time.monotonic()
    mine = job(quiet, QUIET_TOKENS, "Quiet")
    page = pipeline.start(quiet_user, {"model": "scripted", "prompt": "Page", "max_tokens": 8},
                          kind="workbench")  # fmt: skip
    done = harvest_until(quiet, f"/harvest/{mine['id']}", {"succeeded"})
    job_latency = time.monotonic() - sent
    page = pipeline.wait_for_state(page, Generation.TERMINAL, 30)
    page_latency = (page.finished_at - page.created_at).total_seconds()

    still_queued = Generation.objects.filter(
        public_id__in=[j["id"] for j in flood], state="queued"
    ).count()
    # By arrival order the quiet job would wait for every flood job before it (~8 s).
    assert job_latency < 3.0, (job_latency, still_queued)
    assert still_queued >= FLOOD // 2  # it really did overtake most of the flood
    assert done["usage"]["completion_tokens"] == QUIET_TOKENS
    assert page.state == "done" and page_latency < 2.0, page_latency

    # The flood runs to the end all the same.
    wait_until(
        lambda: (
            Generation.objects.filter(public_id__in=[j["id"] for j in flood], state="done").count()
            == FLOOD
        ),
        60,
        "the whole flood",
    )
