"""A job whose answer is huge — full-vocabulary prompt logprobs from the real model
(49,152 entries per position: ~2 MB of JSON per prompt token) — passes through the
worker into Postgres and back out through the harvest a piece at a time: neither the
worker's nor the web process's peak memory grows by anything like the body (reading it
whole, as jobs once did, costs several times its size), and the harvested bytes are
the backend's answer, whole."""

import zlib
from pathlib import Path

import httpx
import pytest

from completions.models import Generation, ResultChunk
from engine.testing import run_engine
from tests.api.conftest import ASYNC, harvest_until
from tests.support import Supervisor, child_env, free_port, start_web, start_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PROMPT_TOKENS = 160  # ~320 MB of answer
GROWTH_LIMIT_MB = 200


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.fixture(scope="module")
def big_stack(django_db_setup, tmp_path_factory):
    pytest.importorskip("llama_cpp")
    from django.conf import settings

    sup = Supervisor()
    logs = tmp_path_factory.mktemp("fullvocab")
    try:
        with run_engine("llama", n_threads=1, startup_timeout=120) as engine:
            env = child_env(
                settings.DATABASES["default"]["NAME"],
                WEFT_BACKEND_URL=f"{engine}/v1",
                WEFT_GENERATION_QUEUE=f"fullvocab-{free_port()}",
                WEFT_BACKEND_READ_TIMEOUT="120",
            )
            url = start_web(sup, env, free_port())
            web = sup.children[-1][1]
            worker = start_worker(sup, env, logs / "worker.log", 1)
            yield {"api": f"{url}/v1", "web": web.pid, "worker": worker.pid}
    finally:
        sup.stop_all()


def test_it_stores_and_harvests_the_answer_piece_by_piece(big_stack, make_key):
    _, secret = make_key()
    http = httpx.Client(base_url=big_stack["api"], timeout=120,
                        headers={"Authorization": f"Bearer {secret}"})  # fmt: skip
    model = http.get("/models").json()["data"][0]["id"]
    # A small job first: both processes have imported and connected everything.
    warm = http.post("/completions", json={"model": model, "prompt": "Hi", "max_tokens": 1},
                     headers=ASYNC).json()  # fmt: skip
    harvest_until(http, f"/harvest/{warm['id']}", {"succeeded"})
    http.get(f"/harvest/{warm['id']}")
    before = {name: peak_mb(big_stack[name]) for name in ("web", "worker")}

    body = {"model": model, "prompt": [504] * PROMPT_TOKENS, "max_tokens": 1,
            "prompt_logprobs": -1}  # fmt: skip
    job = http.post("/completions", json=body, headers=ASYNC).json()
    done = harvest_until(http, f"/harvest/{job['id']}", {"succeeded", "failed"}, timeout=300)
    assert done["status"] == "succeeded", done.get("error")
    run = Generation.objects.get(public_id=job["id"])
    assert run.result_bytes > 300 * 1024 * 1024
    pieces = ResultChunk.objects.filter(generation=run, run_token=run.result_token)
    assert pieces.count() == -(-run.result_bytes // ResultChunk.CHUNK_BYTES)

    # The harvest, gzipped piece by piece: read as a stream, checked as it comes.
    unzip = zlib.decompressobj(31)
    size, tail = 0, b""
    with http.stream("GET", f"/harvest/{job['id']}", headers={"Accept-Encoding": "gzip"}) as r:
        assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
        for chunk in r.iter_raw():
            data = unzip.decompress(chunk)
            size += len(data)
            tail = (tail + data)[-200:]
    assert size > run.result_bytes and tail.endswith(b"}}")  # the job's object around it
    after = {name: peak_mb(big_stack[name]) for name in ("web", "worker")}
    growth = {name: after[name] - before[name] for name in before}
    assert all(mb < GROWTH_LIMIT_MB for mb in growth.values()), growth
