"""/metrics adds up every process of the machine (prometheus_client's multiprocess
mode): two web processes each answer some /v1 requests, and a scrape of either counts
them all; an open stream counts while it is open, and no longer once its process is
killed. Nothing secret or user-written reaches a label: not the key, not the prompt,
not a model id nobody routes. Scraping needs WEFT_METRICS_TOKEN when it is set, and is
localhost only when it is not."""

import secrets
import shutil
import threading

import httpx
import pytest

from launch.datadir import scratch_dir
from tests.api.conftest import ProxyBackend, proxy_env_for
from tests.metrics import parse_metrics, total
from tests.support import Supervisor, free_port, start_web, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = secrets.token_urlsafe(24)
PROMPT = "a prompt nobody may read: " + secrets.token_hex(8)


@pytest.fixture
def two_webs(proxy_engine):
    metrics = scratch_dir("weft-metrics-")  # this test's processes only
    sup = Supervisor()
    env = proxy_env_for(proxy_engine, PROMETHEUS_MULTIPROC_DIR=str(metrics),
                        WEFT_METRICS_TOKEN=TOKEN)  # fmt: skip
    try:
        yield [start_web(sup, env, free_port()) for _ in range(2)], sup
    finally:
        sup.stop_all()
        shutil.rmtree(metrics, ignore_errors=True)


def scrape(base: str) -> tuple[str, dict[tuple[str, tuple], float]]:
    answer = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200, answer.text
    return answer.text, parse_metrics(answer.text)


def test_it_adds_up_both_web_processes(two_webs, proxy_engine, api_key):
    (web_a, web_b), sup = two_webs
    secret = api_key()
    auth = {"Authorization": f"Bearer {secret}"}
    body = {"model": "llama-8b", "prompt": PROMPT, "max_tokens": 4}
    for base, count in ((web_a, 3), (web_b, 2)):
        for _ in range(count):
            answer = httpx.post(f"{base}/v1/completions", json=body, headers=auth, timeout=30)
            assert answer.status_code == 200, answer.text
    unrouted = "model-" + secrets.token_hex(6)
    refused = httpx.post(f"{web_b}/v1/completions", json={**body, "model": unrouted},
                         headers=auth, timeout=30)  # fmt: skip
    assert refused.status_code == 400
    wrong_key = httpx.get(f"{web_a}/v1/models", headers={"Authorization": "Bearer weft-x.nope"})
    assert wrong_key.status_code == 401

    text_a, samples = scrape(web_a)
    text_b, from_b = scrape(web_b)
    ok = {"route": "/v1/completions", "status": "200", "model": "llama-8b"}
    assert total(samples, "weft_api_requests_total", **ok) == 5  # 3 here, 2 there
    assert total(from_b, "weft_api_requests_total", **ok) == 5
    assert total(samples, "weft_api_requests_total", code="model_not_found", model="") == 1
    assert total(samples, "weft_api_requests_total", code="invalid_api_key",
                 route="/v1/models") == 1  # fmt: skip
    assert total(samples, "weft_api_time_to_first_byte_seconds_count", route="/v1/completions") == 6
    assert total(samples, "weft_tokens_total", source="api", direction="completion") == 5 * 4
    for leaked in (secret, secret.split(".")[0] + ".", PROMPT, unrouted, TOKEN, "nope"):
        assert leaked not in text_a and leaked not in text_b


def test_it_counts_open_streams_until_their_process_goes(two_webs, proxy_engine, api_key):
    (web_a, web_b), sup = two_webs
    backend = ProxyBackend(proxy_engine)
    backend.reset()
    backend.faults({"token_delay": 0.05})
    auth = {"Authorization": f"Bearer {api_key()}"}
    body = {"model": "llama-8b", "prompt": "Once", "max_tokens": 400, "stream": True}
    first_frame = threading.Event()

    def stream() -> None:
        try:
            with httpx.stream("POST", f"{web_b}/v1/completions", json=body, headers=auth,
                              timeout=30) as answer:  # fmt: skip
                for _ in answer.iter_raw():
                    first_frame.set()
        except httpx.HTTPError:
            pass  # its process is killed below

    reader = threading.Thread(target=stream, daemon=True)
    reader.start()
    try:
        assert first_frame.wait(15)
        streams = lambda: total(scrape(web_a)[1], "weft_api_active_streams")  # noqa: E731
        assert streams() == 1
        web_b_proc = sup.children[1][1]
        web_b_proc.kill()  # SIGKILL: it never says it is gone
        web_b_proc.wait()
        wait_until(lambda: streams() == 0, 5, "the dead process's stream to be forgotten")
    finally:
        reader.join(10)
        backend.reset()


def test_it_needs_the_token_or_localhost(two_webs, client, settings):
    (web_a, _), _sup = two_webs
    assert httpx.get(f"{web_a}/metrics").status_code == 403  # a token is set: localhost too
    wrong = httpx.get(f"{web_a}/metrics", headers={"Authorization": "Bearer not-it"})
    assert wrong.status_code == 403
    settings.WEFT_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 200  # the test client is 127.0.0.1
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
