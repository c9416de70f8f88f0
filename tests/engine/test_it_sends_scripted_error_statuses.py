"""Scripted faults: error statuses, queued per request, by header, or per server."""

from __future__ import annotations

import httpx
import pytest

from engine.testing import run_engine

OK = {"prompt": "The cat", "max_tokens": 2}


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (429, "rate_limited"),
        (500, "internal_error"),
        (502, "upstream_error"),
        (503, "upstream_unavailable"),
    ],
)
def test_it_sends_retryable_errors_with_retry_after(
    scripted: httpx.Client, status: int, code: str
) -> None:
    scripted.post("/_scripted/faults", json={"faults": [{"status": status, "retry_after": 2}]})
    r = scripted.post("/v1/completions", json=OK)
    assert r.status_code == status
    assert r.headers["retry-after"] == "2" and "x-should-retry" not in r.headers
    assert r.json()["error"]["code"] == code
    assert r.json()["request_id"] == r.headers["x-request-id"]


def test_it_marks_a_deadline_as_not_retryable(scripted: httpx.Client) -> None:
    scripted.post("/_scripted/faults", json={"faults": [{"status": 504}]})
    r = scripted.post("/v1/completions", json=OK)
    assert r.status_code == 504 and r.headers["x-should-retry"] == "false"
    assert "retry-after" not in r.headers
    assert r.json()["error"]["code"] == "upstream_deadline"


def test_it_consumes_queued_faults_in_order(scripted: httpx.Client) -> None:
    faults = [{"status": 429, "code": "queue_full"}, {"status": 503}]
    assert scripted.post("/_scripted/faults", json={"faults": faults}).json()["queued"] == 2
    statuses = [scripted.post("/v1/completions", json=OK) for _ in range(3)]
    assert [r.status_code for r in statuses] == [429, 503, 200]
    assert statuses[0].json()["error"]["code"] == "queue_full"


def test_it_clears_the_queue(scripted: httpx.Client) -> None:
    scripted.post("/_scripted/faults", json={"faults": [{"status": 500}]})
    assert scripted.delete("/_scripted/faults").json()["queued"] == 0
    assert scripted.post("/v1/completions", json=OK).status_code == 200


def test_it_takes_a_fault_from_the_request_header(scripted: httpx.Client) -> None:
    r = scripted.post("/v1/completions", json=OK, headers={"X-Scripted-Fault": '{"status": 502}'})
    assert r.status_code == 502
    assert scripted.post("/v1/completions", json=OK).status_code == 200


def test_it_rejects_a_malformed_fault(scripted: httpx.Client) -> None:
    r = scripted.post("/_scripted/faults", json={"faults": [{"status": 418}]})
    assert r.status_code == 400
    assert scripted.get("/_scripted/faults").json()["queued"] == 0


def test_it_applies_a_server_wide_fault() -> None:
    with run_engine("scripted", fault={"status": 503, "retry_after": 0}) as url:
        for _ in range(2):
            r = httpx.post(url + "/v1/completions", json=OK)
            assert r.status_code == 503 and r.headers["retry-after"] == "0"
