"""The real ASGI server answers 413 to an over-large body before reading it — before
authentication, before Django spools it to disk: at once for a Content-Length over the
limit, at the limit for a chunked body. /v1/ (routed before this cap, with a limit of its
own) gets a JSON envelope; imports a larger cap."""

import json
import socket
import time

import pytest

from api.models import ApiKey, ApiRequest
from tests.support import Supervisor, free_port, start_web

LIMIT = 64 * 1024
IMPORT_LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def server(stack_env):
    sup = Supervisor()
    env = {
        **stack_env,
        "WEFT_MAX_REQUEST_BYTES": str(LIMIT),
        "WEFT_MAX_IMPORT_BYTES": str(IMPORT_LIMIT),
        "WEFT_API_MAX_BODY_BYTES": str(LIMIT),
    }
    try:
        url = start_web(sup, env, free_port())
        yield int(url.rsplit(":", 1)[1])
    finally:
        sup.stop_all()


def exchange(port: int, head: str, chunks: list[bytes] = (), timeout: float = 5.0) -> bytes:
    """Send a request head and some body bytes — never the rest — and read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode() + b"\r\n")
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except OSError:  # the server already answered and closed
                break
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer) < answer.find(b"\r\n\r\n") + 40:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
        return answer


def head(path: str, **headers: str) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return "\r\n".join(lines) + "\r\n"


def chunked(total: int, size: int = 16 * 1024) -> list[bytes]:
    return [f"{size:x}\r\n".encode() + b"x" * size + b"\r\n" for _ in range(total // size)]


@pytest.mark.django_db
def test_it_answers_413_to_a_huge_content_length_without_reading(server):
    started = time.monotonic()
    answer = exchange(server, head("/workbench/run/", Content_Length=str(10**10)))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"larger than the limit of 65,536 bytes" in answer
    assert time.monotonic() - started < 3


@pytest.mark.django_db
def test_it_cuts_a_chunked_body_at_the_limit(server):
    answer = exchange(
        server, head("/workbench/run/", Transfer_Encoding="chunked"), chunked(LIMIT * 2)
    )
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


@pytest.mark.django_db(transaction=True)
def test_it_answers_the_api_in_json(server, make_user):
    key_owner = make_user()
    _, secret = ApiKey.objects.create_key(key_owner, "big bodies")
    answer = exchange(
        server,
        head(
            "/v1/completions",
            Content_Length=str(LIMIT + 1),
            Authorization=f"Bearer {secret}",
            Content_Type="application/json",
        ),
    )
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"application/json" in answer.split(b"\r\n\r\n")[0]
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "request_too_large"
    # The proxy records the request's metadata after answering; wait for it, so the
    # test's teardown (a TRUNCATE) never races the server's write.
    key = ApiKey.objects.get(user__username=key_owner.username)
    deadline = time.monotonic() + 10
    while not ApiRequest.objects.filter(key=key, status=413).exists():
        assert time.monotonic() < deadline, "the 413 was never recorded"
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_it_lets_imports_be_larger(server, make_user, session_cookie):
    """For a signed-in user (tests/test_it_gives_anonymous_uploads_the_small_limit.py:
    an anonymous request gets the small limit there too)."""
    cookie = f"sessionid={session_cookie(make_user())}"
    size = LIMIT * 2
    body = [b"x" * size]
    allowed = exchange(server, head("/loom/import/", Content_Length=str(size), Cookie=cookie), body)
    assert allowed.startswith(b"HTTP/1.1 403"), allowed[:200]  # Django's CSRF check
    refused = exchange(
        server, head("/loom/import/", Content_Length=str(IMPORT_LIMIT + 1), Cookie=cookie)
    )
    assert refused.startswith(b"HTTP/1.1 413")


@pytest.mark.django_db
def test_it_passes_small_bodies_through(server):
    answer = exchange(
        server,
        head("/workbench/run/", Content_Length="5", Content_Type="text/plain"),
        [b"hello"],
    )
    # Django's own answer (CSRF refuses an anonymous POST): the limit let it through.
    assert answer.startswith(b"HTTP/1.1 403") and b"CSRF" in answer, answer[:200]
