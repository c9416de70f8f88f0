"""Each way the backend can fail — an error status, a timeout, no answer at all, a
stream or body cut midway — becomes the seed's code, status and headers."""

import httpx
import pytest

from api.models import ApiRequest
from tests.support import Supervisor, free_port, start_web, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Tell me", "max_tokens": 5}

STATUSES = [
    # backend fault, our status, our code
    ({"status": 500}, 502, "upstream_error"),
    ({"status": 502}, 502, "upstream_error"),
    ({"status": 503, "retry_after": 7}, 503, "upstream_unavailable"),
    ({"status": 429, "code": "queue_full", "retry_after": 3}, 503, "upstream_unavailable"),
    ({"status": 504}, 504, "upstream_deadline"),
]


def post(base: str, secret: str, **extra) -> httpx.Response:
    return httpx.post(f"{base}/completions", json={**BODY, **extra},
                      headers={"Authorization": f"Bearer {secret}"}, timeout=30)  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_it_maps_each_error_status(proxy, api_key, stream):
    base, backend = proxy
    secret = api_key()
    backend.faults(*[fault for fault, _, _ in STATUSES])
    for fault, status, code in STATUSES:
        response = post(base, secret, stream=stream)
        assert response.status_code == status, (fault, response.text)
        body = response.json()
        assert (
            body["error"]["code"] == code and body["request_id"] == response.headers["x-request-id"]
        )
        headers = response.headers
        assert headers["x-acs-upstream-error-kind"] == code
        assert headers["x-acs-upstream-model"] == "weft/scripted-tiny"
        assert headers["x-acs-upstream-gpu"] == "scripted-gpu0"
        if status == 504:
            assert "retry-after" not in headers and headers["x-should-retry"] == "false"
        else:
            assert int(headers["retry-after"]) == fault.get("retry_after", 1)


def test_it_passes_the_backends_own_refusal_as_a_400(proxy, api_key):
    base, _ = proxy
    response = post(base, api_key(), prompt="word " * 3000, max_tokens=10)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"
    assert response.headers["x-acs-upstream-error-kind"] == "context_length_exceeded"


def test_it_ends_a_cut_stream_with_an_error_frame_never_done(proxy, make_key):
    base, backend = proxy
    key, secret = make_key()
    backend.faults({"cut_after": 3})
    response = post(base, secret, stream=True, max_tokens=20)
    assert response.status_code == 200
    frames = [f for f in response.text.split("\n\n") if f]
    assert len(frames) == 4 and "data: [DONE]" not in response.text
    assert '"code": "upstream_error"' in frames[-1]
    row = wait_until(lambda: ApiRequest.objects.filter(key=key, settled=True).first(), 10, "row")
    assert (row.error_code, row.completion_tokens) == ("upstream_error", 3)


def test_it_leaves_a_cut_json_body_incomplete(proxy, api_key):
    base, backend = proxy
    backend.faults({"cut_after": 1})
    with pytest.raises(httpx.HTTPError):
        post(base, api_key())


def test_it_answers_upstream_deadline_past_the_request_window(proxy_engine, proxy, api_key):
    from tests.api.conftest import proxy_env_for

    _, backend = proxy
    sup = Supervisor()
    try:
        base = start_web(sup, proxy_env_for(proxy_engine, WEFT_API_REQUEST_WINDOW_SECONDS="2"),
                         free_port()) + "/v1"  # fmt: skip
        backend.faults({"first_byte_delay": 4})
        response = post(base, api_key())
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "upstream_deadline"
        assert response.headers["x-should-retry"] == "false"
        assert "retry-after" not in response.headers
    finally:
        sup.stop_all()


def test_it_answers_upstream_unavailable_when_no_backend_answers(proxy_engine, api_key):
    from tests.api.conftest import proxy_env_for

    dead = f"http://127.0.0.1:{free_port()}"
    env = proxy_env_for(proxy_engine)
    env["WEFT_BACKENDS"] = env["WEFT_BACKENDS"].replace(proxy_engine, dead)
    sup = Supervisor()
    try:
        base = start_web(sup, env, free_port()) + "/v1"
        response = post(base, api_key())
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "upstream_unavailable"
        assert int(response.headers["retry-after"]) >= 1
    finally:
        sup.stop_all()


def test_it_ends_a_stream_that_goes_quiet_with_upstream_deadline(proxy_engine, proxy, make_key):
    from tests.api.conftest import proxy_env_for

    _, backend = proxy
    key, secret = make_key()
    sup = Supervisor()
    try:
        env = proxy_env_for(proxy_engine, WEFT_BACKEND_READ_TIMEOUT="1")
        base = start_web(sup, env, free_port()) + "/v1"
        backend.faults({"token_delay": 3})
        response = post(base, secret, stream=True)
        assert response.status_code == 200  # the headers had gone out
        assert "data: [DONE]" not in response.text
        assert '"code": "upstream_deadline"' in response.text.strip().split("\n\n")[-1]
        row = wait_until(lambda: ApiRequest.objects.filter(key=key, settled=True).first(), 10,
                         "row")  # fmt: skip
        assert row.error_code == "upstream_deadline"
    finally:
        sup.stop_all()
