"""The production topology, run (tests/deploy/topology.py: nginx on deploy/'s site file
with TLS, two web processes, a worker per pool, beat, Postgres and Redis as TCP servers
with passwords, two backends), and what it must survive. Through nginx:

- a Workbench run streams over its WebSocket, a /v1 stream arrives token by token, a
  job runs; bodies are refused at Weft's own limits, /v1's in its envelope;
- the per-key limits hold across both web processes;
- web process 1 is killed mid-stream: the page's socket reconnects to process 2 and
  its run ends whole; a reload shows the run again; a /v1 request it was serving gets
  the seed's retryable envelope, a stream it was sending ends without [DONE], and
  both work when sent again;
- a worker is killed mid-run: the page run is marked interrupted with its text kept,
  a job is run again by the pool's next worker;
- `migrate` adds a nullable column while requests go on: none fails;
- Redis, then Postgres, restart: everything works again, nothing of Weft restarted
  by hand (a worker that exits is started again, as systemd's Restart=always does) —
  but for the /v1 path after Postgres, issue 20's (an expected failure until then).
"""

import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from engine.testing import run_engine
from launch.commands import manage
from tests.api.conftest import ASYNC, harvest_until
from tests.completions.wsclient import Page
from tests.deploy.topology import NGINX, Socket, Topology, expected_text, start_run, until
from tests.metrics import parse_metrics, total

pytestmark = pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx: `make test` installs it")

PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def topology():
    with run_engine("scripted") as engine_a, run_engine("scripted") as engine_b:
        topology = Topology([engine_a, engine_b])
        try:
            topology.start()
            yield topology
        finally:
            topology.stop()


@pytest.fixture
def faults(topology):
    """faults(engine_index, *faults): queue scripted faults on backend a (0) or b (1),
    one per completion request; every queue is empty again after the test."""

    def queue(which: int, *items: dict, fresh: bool = False) -> None:
        engine = topology.engines[which]
        if fresh:  # what is left of the earlier faults goes
            httpx.delete(f"{engine}/_scripted/faults").raise_for_status()
        httpx.post(f"{engine}/_scripted/faults", json={"faults": list(items)}).raise_for_status()

    def clear() -> None:
        for engine in topology.engines:
            httpx.delete(f"{engine}/_scripted/faults").raise_for_status()

    clear()
    yield queue
    clear()


@pytest.fixture(scope="module")
def key(topology):
    return {"Authorization": f"Bearer {topology.api_key()}"}


def run_body(max_tokens: int, seed: int = 7) -> dict:
    return {"model": "tiny-a", "prompt": PROMPT, "seed": seed, "max_tokens": max_tokens}


def run_row(topology: Topology, generation_id: int) -> dict:
    with topology.db() as conn:
        cursor = conn.execute(
            "SELECT state, error_code, choices FROM completions_generation WHERE id = %s",
            [generation_id],
        )
        state, code, choices = cursor.fetchone()
    return {"state": state, "error_code": code, "text": choices[0]["text"] if choices else ""}


def finished_run(topology: Topology, generation_id: int) -> dict:
    return until(
        lambda: (r := run_row(topology, generation_id))["state"] not in ("queued", "running") and r,
        30,
        f"run {generation_id} to end",
    )


def watched_run(
    topology: Topology, http: httpx.Client, body: dict, *, sockets: int = 1
) -> tuple[int, Page]:
    """A Workbench run, watched to its end over its socket, through nginx. A socket that
    ends before the run is opened again, up to `sockets` in all, as the page does (the
    ws extension reconnects on an abnormal close, 1006: a process gone, a failed
    handshake)."""
    generation_id = start_run(http, body)
    page = Page()
    errors = []
    for _ in range(sockets):
        socket = Socket(topology, http, generation_id, page)
        until(lambda s=socket: page.final or s.closed.is_set(), 30, "the run's final fragment")
        socket.stop.set()
        if page.final:
            break
        errors.append(socket.error)
    assert page.final, (errors, run_row(topology, generation_id))
    return generation_id, page


def completion(topology: Topology, key: dict, **body) -> httpx.Response:
    with topology.http() as http:
        return http.post(
            "/v1/completions", json={"model": "tiny-b", "prompt": PROMPT, **body}, headers=key
        )


def test_it_serves_pages_streams_and_jobs_through_nginx(topology, key, faults):
    t = topology
    plain = httpx.get(f"http://127.0.0.1:{t.http_port}/workbench/")
    assert plain.status_code == 301 and plain.headers["location"].startswith("https://")

    http = t.log_in()
    session = next(c for c in http.cookies.jar if c.name == "sessionid")
    assert session.secure  # over https behind the proxy: SESSION_COOKIE_SECURE holds
    workbench = http.get("/workbench/")
    assert workbench.status_code == 200 and workbench.headers["strict-transport-security"]
    asset = re.search(r"/static/[\w/.-]+\.[0-9a-f]{12}\.(?:css|js)", workbench.text)
    assert asset, "static files under content-hashed names"
    served = http.get(asset[0])
    assert served.status_code == 200 and "immutable" in served.headers["cache-control"]

    faults(0, {"token_delay": 0.02})  # the socket joins while it streams
    body = run_body(40)
    generation_id, page = watched_run(t, http, body)
    assert page.final and page.text(0) == expected_text(t.engines[0], body)
    assert run_row(t, generation_id)["state"] == "done"

    faults(1, {"token_delay": 0.05})
    arrivals = []
    with t.http() as client, client.stream(
        "POST", "/v1/completions", headers=key,
        json={"model": "tiny-b", "prompt": PROMPT, "max_tokens": 20, "stream": True},
    ) as stream:  # fmt: skip
        assert stream.status_code == 200
        for chunk in stream.iter_raw():
            arrivals.append((time.monotonic(), chunk))
    text = b"".join(chunk for _, chunk in arrivals)
    assert text.rstrip().endswith(b"data: [DONE]")
    # Unbuffered: the frames came as the backend sent them, over a second, not at once.
    assert len(arrivals) >= 10 and arrivals[-1][0] - arrivals[0][0] > 0.5

    with t.http(headers=key) as client:
        job = client.post("/v1/completions", headers=ASYNC,
                          json={"model": "tiny-b", "prompt": PROMPT, "max_tokens": 8})  # fmt: skip
        assert job.status_code == 202, job.text
        assert harvest_until(client, job.headers["location"], {"succeeded"})["result"]

    # Weft's limits, at nginx: the largest body passes (to Weft, which reads it: not
    # JSON), one byte more is the API's own 413 envelope.
    with t.http(headers={**key, "Content-Type": "application/json"}) as client:
        limit = int(t.env["WEFT_API_MAX_BODY_BYTES"])
        passed = client.post("/v1/completions", content=b" " * limit)
        assert passed.status_code == 400 and passed.json()["error"]["code"] == "invalid_request"
        refused = client.post("/v1/completions", content=b" " * (limit + 1))
        assert refused.status_code == 413, refused.text[:300]
        assert refused.json()["error"]["code"] == "request_too_large"
        assert refused.json()["request_id"] == refused.headers["x-request-id"]


def test_it_holds_the_key_limits_across_both_web_processes(topology, faults):
    t = topology
    key = {"Authorization": f"Bearer {t.api_key()}"}  # 2 active + 2 waiting
    faults(0, *[{"token_delay": 0.05}] * 4)
    answers: list[tuple[int, int, str]] = []
    start = threading.Barrier(8)

    def send() -> None:
        with t.http() as client:
            start.wait()
            with client.stream(
                "POST", "/v1/completions", headers=key,
                json={"model": "tiny-a", "prompt": PROMPT, "max_tokens": 20, "stream": True},
            ) as answer:  # fmt: skip
                body = answer.read()
                code = answer.json()["error"]["code"] if answer.status_code != 200 else ""
                answers.append((answer.status_code, t.upstream(answer), code))
                assert answer.status_code != 200 or body.rstrip().endswith(b"[DONE]")

    senders = [threading.Thread(target=send) for _ in range(8)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(30)
    assert sorted(status for status, _, _ in answers) == [200] * 4 + [429] * 4, answers
    assert {code for status, _, code in answers if status == 429} == {"queue_full"}
    assert {port for _, port, _ in answers} == set(t.web_ports)  # both processes refused


def test_it_exposes_every_process_s_metrics_to_the_scraper_only(topology, key):
    t = topology
    with t.http() as client:
        assert client.get("/metrics").status_code == 404  # not through the public name
    direct = httpx.get(f"http://127.0.0.1:{t.web_ports[1]}/metrics",
                       headers={"Authorization": f"Bearer {t.env['WEFT_METRICS_TOKEN']}"})  # fmt: skip
    assert direct.status_code == 200
    samples = parse_metrics(direct.text)
    now = time.time()
    for pool in ("interactive", "bulk"):
        beat = total(samples, "weft_worker_heartbeat_timestamp_seconds", pool=pool)
        assert now - beat < 15, (pool, now - beat)
    assert total(samples, "weft_api_requests_total", route="/v1/completions") >= 10
    assert total(samples, "weft_runs_finished_total", lane="interactive", state="done") >= 1
    assert ("weft_runs", (("lane", "jobs"), ("state", "queued"))) in samples
    assert t.env["WEFT_METRICS_TOKEN"] not in direct.text


def test_it_moves_clients_to_the_other_web_process_when_one_dies(topology, key, faults):
    t = topology
    victim, survivor = t.web_ports
    http = t.log_in()
    body = run_body(300, seed=11)
    faults(0, {"token_delay": 0.03})
    generation_id = start_run(http, body)
    # Sockets until one reaches web process 1 (nginx takes them in turn).
    page = Page()
    for _ in range(6):
        socket = Socket(t, http, generation_id, page)
        if socket.upstream == victim:
            break
        socket.stop.set()
        socket.closed.wait(5)
    assert socket.upstream == victim

    # A /v1 stream on process 1 too, and non-streaming requests waiting on both.
    faults(1, *[{"token_delay": 0.05}] * 6)
    streamed: dict = {}

    def stream(out: dict) -> None:
        try:
            with t.http() as client, client.stream(
                "POST", "/v1/completions", headers=key,
                json={"model": "tiny-b", "prompt": PROMPT, "max_tokens": 200, "stream": True},
            ) as answer:  # fmt: skip
                out["port"] = t.upstream(answer)
                out["started"].set()
                if out["port"] != victim:
                    return
                out["body"] = b""
                for chunk in answer.iter_raw():
                    out["body"] += chunk
        except httpx.HTTPError as exc:
            out["error"] = exc
        finally:
            out["started"].set()
            out["done"] = True

    for _ in range(6):
        streamed = {"started": threading.Event()}
        threading.Thread(target=stream, args=(streamed,), daemon=True).start()
        assert streamed["started"].wait(15)
        if streamed.get("port") == victim:
            break
    assert streamed.get("port") == victim
    until(lambda: len(streamed.get("body", b"")) > 0, 10, "the stream's first frames")
    faults(1, *[{"first_byte_delay": 3}] * 4, fresh=True)
    waiting: list[httpx.Response] = []
    other_key = {"Authorization": f"Bearer {t.api_key()}"}  # its own 2 active + 2 waiting
    requests = [
        threading.Thread(target=lambda: waiting.append(completion(t, other_key, max_tokens=4)))
        for _ in range(4)
    ]
    for request in requests:
        request.start()
    until(lambda: len(page.text(0)) > 20, 10, "the page's first tokens")
    time.sleep(0.5)  # the waiting requests are at the backend

    t.kill("web-1")

    # The page's socket ends; the page opens it again, through nginx, to process 2.
    assert socket.closed.wait(10)
    again = Socket(t, http, generation_id, page)
    assert again.upstream == survivor
    until(lambda: page.final, 30, "the run's end on the reconnected socket")
    saved = finished_run(t, generation_id)
    assert saved["state"] == "done"
    assert page.text(0) == saved["text"] == expected_text(t.engines[0], body)  # no text lost
    assert f'id="gen-{generation_id}-result"' in http.get("/workbench/").text  # a reload shows it

    # /v1: the stream process 1 was sending ends without [DONE]; the requests it was
    # serving get the retryable envelope (nginx's, in the seed's shape); the others end.
    until(lambda: streamed.get("done"), 10, "the cut stream to end")
    assert b"[DONE]" not in streamed.get("body", b"")
    for request in requests:
        request.join(15)
    statuses = sorted(answer.status_code for answer in waiting)
    ports = [a.headers.get("x-test-upstream") for a in waiting]
    assert 503 in statuses and set(statuses) <= {200, 503}, (statuses, ports)
    for answer in waiting:
        if answer.status_code == 503:
            error = answer.json()
            assert error["error"]["code"] == "upstream_unavailable"
            assert answer.headers["retry-after"] == "1"
            assert error["request_id"] == answer.headers["x-request-id"]
    faults(1)
    assert completion(t, key, max_tokens=4).status_code == 200  # sent again: it works
    retried = completion(t, key, max_tokens=30, stream=True)
    assert retried.status_code == 200 and retried.text.rstrip().endswith("[DONE]")
    t.wait_ready("web-1", since=0)  # started again by its supervisor


def test_it_keeps_the_runs_of_a_killed_worker(topology, key, faults):
    t = topology
    http = t.log_in()
    body = run_body(300, seed=13)
    faults(0, {"token_delay": 0.03})
    generation_id = start_run(http, body)
    page = Page()
    Socket(t, http, generation_id, page)
    until(lambda: len(page.text(0)) > 20, 10, "the run's first tokens")
    since = t.log_size("worker-interactive")
    t.kill("worker-interactive")
    time.sleep(2.5)  # past WEFT_GENERATION_STALE_SECONDS
    # A page asking about a run whose worker stopped beating marks it interrupted.
    assert http.get(f"/generations/{generation_id}/result/").status_code == 200
    saved = finished_run(t, generation_id)
    assert (saved["state"], saved["error_code"]) == ("interrupted", "worker_lost")
    assert saved["text"] and expected_text(t.engines[0], body).startswith(saved["text"])
    t.wait_ready("worker-interactive", since)
    assert watched_run(t, http, run_body(10))[1].final  # the pool works again

    # A job whose worker dies is run again, whole, by the pool's next worker.
    job_body = {"model": "tiny-b", "prompt": PROMPT, "max_tokens": 100, "seed": 5}
    faults(1, {"token_delay": 0.05})
    with t.http(headers=key) as client:
        job = client.post("/v1/completions", headers=ASYNC, json=job_body)
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]
        with t.db() as conn:
            until(lambda: conn.execute("SELECT state FROM completions_generation WHERE public_id = %s",
                                       [job_id]).fetchone()[0] == "running", 15, "the job to run")  # fmt: skip
        time.sleep(0.5)
        since = t.log_size("worker-bulk")
        t.kill("worker-bulk")
        t.wait_ready("worker-bulk", since)
        done = harvest_until(client, job.headers["location"], {"succeeded"}, timeout=60)
    assert done["result"]["choices"][0]["text"] == expected_text(t.engines[1], job_body)


def test_it_migrates_the_running_topology_without_failing_requests(topology, key):
    t = topology
    http = t.log_in()
    seen: list[tuple[str, int]] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            seen.append(("v1", completion(t, key, max_tokens=2).status_code))
            seen.append(("page", http.get("/workbench/").status_code))

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        until(lambda: len(seen) >= 4, 10, "requests under way")
        before = len(seen)
        manage({**t.env, "DJANGO_SETTINGS_MODULE": "tests.deploy.expand_settings"},
               "migrate", "--noinput", capture=True)  # fmt: skip
        during = len(seen) - before
        time.sleep(1)  # and requests go on after it, on the widened table
    finally:
        stop.set()
        loader.join(30)
    assert during >= 1 and {status for _, status in seen} == {200}, seen
    with t.db() as conn:
        column = conn.execute(
            "SELECT is_nullable FROM information_schema.columns "
            "WHERE table_name = 'api_apirequest' AND column_name = 'expand_note'"
        ).fetchone()
        assert column == ("YES",)
        (written,) = conn.execute(
            "SELECT count(*) FROM api_apirequest WHERE expand_note IS NULL"
        ).fetchone()
    assert written >= len([s for s in seen if s[0] == "v1"])


def v1_works_again(t: Topology, key: dict, what: str) -> list[int]:
    """A /v1 request and a job's submission work again within 20 s of a restart, and
    from then on; returns the statuses answered before they did."""
    failed: list[int] = []

    def answered() -> bool:
        status = completion(t, key, max_tokens=4).status_code
        failed.extend([status] if status != 200 else [])
        return status == 200

    until(answered, 20, f"/v1 after the {what} restart ({failed}; {t.errors()})")
    for _ in range(4):
        assert completion(t, key, max_tokens=4).status_code == 200, t.errors()
    with t.http(headers=key) as client:
        job = client.post("/v1/completions", headers=ASYNC,
                          json={"model": "tiny-b", "prompt": PROMPT, "max_tokens": 6})  # fmt: skip
        assert job.status_code == 202, (job.text, t.errors())
        assert harvest_until(client, job.headers["location"], {"succeeded"}, timeout=60)
    return failed


def page_works_again(t: Topology, http: httpx.Client) -> None:
    """A page run streams over its socket to its end. A web process's first socket after
    a Redis restart fails once (channels_redis's receive loop meets the closed
    connection), a handshake may fail on a database connection the restart closed: the
    page reconnects (its ws extension does on 1006), as here, and the next one works."""
    generation_id, _page = watched_run(t, http, run_body(12, seed=17), sockets=3)
    assert finished_run(t, generation_id)["state"] == "done"


def test_it_comes_back_after_redis_then_postgres_restart(topology, key):
    t = topology
    http = t.log_in()
    t.restart("redis")
    page_works_again(t, http)
    assert v1_works_again(t, key, "Redis") == []  # the first request works already
    t.restart("postgres")
    page_works_again(t, http)
    # The /v1 path's own connections (api/db.py, the ledger's pool) are replaced too.
    assert v1_works_again(t, key, "Postgres") == []
