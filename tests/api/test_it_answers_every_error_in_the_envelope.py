"""Every error under /v1 is the OpenAI envelope with request_id == X-Request-Id — never
Django's HTML, its CSRF refusal, a login redirect or a bare {"detail": ...}."""

import httpx
import pytest

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = {"model": "llama-8b", "prompt": "Hi", "max_tokens": 1}


def check(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "request_id"}
    assert body["error"]["code"] == code
    assert body["error"]["message"] and body["error"]["type"]
    assert body["request_id"] == response.headers["x-request-id"]
    return body


def test_it_refuses_a_missing_or_bad_key_with_401(proxy, api_key):
    base, backend = proxy
    check(httpx.post(f"{base}/completions", json=GOOD), 401, "missing_api_key")
    bad = {"Authorization": "Bearer weft-00000000.not-a-real-secret"}
    check(httpx.post(f"{base}/completions", json=GOOD, headers=bad), 401, "invalid_api_key")
    check(httpx.get(f"{base}/models", headers={"Authorization": "Basic abc"}), 401,
          "invalid_api_key")  # fmt: skip
    assert backend.requests() == []  # nothing was sent


def test_it_answers_unknown_routes_and_methods(proxy, api_key):
    base, _ = proxy
    auth = {"Authorization": f"Bearer {api_key()}"}
    check(httpx.post(f"{base}/nothing-here", json=GOOD, headers=auth), 404, "not_found")
    check(httpx.get(f"{base}", headers=auth), 404, "not_found")
    wrong = httpx.get(f"{base}/completions", headers=auth)
    check(wrong, 405, "method_not_allowed")
    assert wrong.headers["allow"] == "POST"
    check(httpx.delete(f"{base}/models", headers=auth), 405, "method_not_allowed")


def test_it_refuses_bad_bodies_and_query_strings(proxy, api_key):
    base, backend = proxy
    auth = {"Authorization": f"Bearer {api_key()}", "Content-Type": "application/json"}
    check(httpx.post(f"{base}/completions", content=b"{not json", headers=auth), 400,
          "invalid_request")  # fmt: skip
    check(httpx.post(f"{base}/completions", content=b"\xff\xfe", headers=auth), 400,
          "invalid_request")  # fmt: skip
    check(httpx.post(f"{base}/completions", json=[1, 2], headers=auth), 400, "invalid_request")
    body = check(
        httpx.post(f"{base}/completions?stream=true", json=GOOD, headers=auth), 400,
        "invalid_request",
    )  # fmt: skip
    assert body["error"]["param"] == "stream"
    check(httpx.post(f"{base}/completions?%zz", json=GOOD, headers=auth), 400,
          "invalid_request")  # fmt: skip
    assert backend.requests() == []


def test_it_refuses_a_body_too_large_before_reading_it(proxy, api_key):
    base, backend = proxy
    auth = {"Authorization": f"Bearer {api_key()}", "Content-Type": "application/json"}
    huge = b'{"prompt": "' + b"a" * (8 * 1024 * 1024) + b'"}'
    response = httpx.post(f"{base}/completions", content=huge, headers=auth, timeout=30)
    check(response, 413, "request_too_large")
    assert response.headers["x-should-retry"] == "false"

    def chunks():  # no Content-Length: refused while reading
        for _ in range(9):
            yield b"a" * (1024 * 1024)

    chunked = httpx.post(f"{base}/completions", content=chunks(), headers=auth, timeout=30)
    check(chunked, 413, "request_too_large")
    assert backend.requests() == []


def test_it_needs_no_csrf_token_or_session(proxy, api_key, client):
    """Django's CSRF and LoginRequired middleware never see /v1."""
    base, _ = proxy
    ok = httpx.post(f"{base}/completions", json=GOOD,
                    headers={"Authorization": f"Bearer {api_key()}", "Cookie": "csrftoken=x"})  # fmt: skip
    assert ok.status_code == 200 and ok.json()["object"] == "text_completion"
    assert ok.headers["x-request-id"].startswith("req-")


def test_it_refuses_chat_completions(proxy, api_key):
    base, backend = proxy
    auth = {"Authorization": f"Bearer {api_key()}"}
    chat = {"model": "llama-8b", "messages": [{"role": "user", "content": "hi"}]}
    check(httpx.post(f"{base}/chat/completions", json=chat, headers=auth), 400,
          "chat_completions_unsupported")  # fmt: skip
    assert backend.requests() == []
