"""The import allowance (WEFT_MAX_IMPORT_BYTES on /loom/import/ and /batch/new/) is a
signed-in user's: an anonymous request — no session, a made-up or stale one — gets the
small limit (WEFT_MAX_REQUEST_BYTES) there too, answered 413 before the body is read
(Django would spool it to disk before its login check ever ran)."""

import time

import pytest

from tests.test_it_refuses_oversized_bodies_before_reading_them import (
    IMPORT_LIMIT,
    LIMIT,
    chunked,
    exchange,
    head,
    server,  # noqa: F401 - the fixture: a real ASGI server with small limits
)

pytestmark = pytest.mark.django_db(transaction=True)

PATHS = ["/loom/import/", "/batch/new/"]
BETWEEN = (LIMIT + IMPORT_LIMIT) // 2  # over the small limit, under the import one


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cookie", [None, "sessionid=made-up-session-key-0123456789abcdef"])
def test_it_refuses_an_anonymous_upload_past_the_small_limit(server, path, cookie):  # noqa: F811
    cookies = {"Cookie": cookie} if cookie else {}
    started = time.monotonic()
    declared = exchange(server, head(path, Content_Length=str(BETWEEN), **cookies))
    assert declared.startswith(b"HTTP/1.1 413"), declared[:200]
    assert f"larger than the limit of {LIMIT:,} bytes".encode() in declared
    assert time.monotonic() - started < 3  # answered without waiting for the body
    cut = exchange(server, head(path, Transfer_Encoding="chunked", **cookies), chunked(BETWEEN))
    assert cut.startswith(b"HTTP/1.1 413"), cut[:200]


@pytest.mark.parametrize("path", PATHS)
def test_it_gives_a_signed_in_user_the_import_allowance(server, path, make_user, session_cookie):  # noqa: F811
    cookie = {"Cookie": f"sessionid={session_cookie(make_user())}"}
    body = [b"x" * BETWEEN]
    declared = exchange(server, head(path, Content_Length=str(BETWEEN), **cookie), body)
    # Past the cap: Django's own answer (its CSRF check refuses a POST without a token).
    assert declared.startswith(b"HTTP/1.1 403"), declared[:200]
    whole = [*chunked(BETWEEN), b"0\r\n\r\n"]  # the last chunk: the body is complete
    passed = exchange(server, head(path, Transfer_Encoding="chunked", **cookie), whole)
    assert passed.startswith(b"HTTP/1.1 403"), passed[:200]


def test_it_refuses_a_session_ended_by_a_password_change(server, make_user, session_cookie):  # noqa: F811
    user = make_user()
    cookie = {"Cookie": f"sessionid={session_cookie(user)}"}
    user.set_password("another-long-password")
    user.save()
    answer = exchange(server, head("/loom/import/", Content_Length=str(BETWEEN), **cookie))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
