"""Every /v1 path and query parameter, fed what nobody types (hypothesis): NUL, lone
surrogates (uvicorn decodes %-escapes with replacement characters, another ASGI server
may not), 10 kB values, odd %-encodings, bytes that are not UTF-8. The /v1 ASGI app is
called in this process with the raw scope a server would give it, as a user with a
live key. Each answer is a 4xx in the seed's envelope (request_id == X-Request-Id),
never a 500: `GET /v1/harvest/%00` was one (Postgres refuses a NUL in text)."""

import asyncio
import json
import string
from urllib.parse import quote

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from api.asgi import V1Router
from api.models import ApiKey
from api.proxy import close_connections

pytestmark = pytest.mark.django_db(transaction=True)

VALID_ID = "job-" + "0" * 24  # the shape of a job id, but nobody's job
NASTY = [
    "", "\x00", "a\x00b", "\ud800", "\udfff", "job-\ud800", VALID_ID + "\x00", VALID_ID[:-1],
    VALID_ID.upper(), VALID_ID + "0", "x" * 10_000, "%00", "%ED%A0%80", "\ufffd", "..",
    "job-" + "0" * 10_000, "é", "🦉", " ", "\n", "\\", "'", '"', "<script>", "9" * 400,
]  # fmt: skip
segment = st.one_of(
    st.sampled_from(NASTY),
    # Any code point, lone surrogates included (Cs is left out by default).
    st.text(st.characters(exclude_categories=()), max_size=30),
    st.text(st.sampled_from(string.hexdigits + "-job"), max_size=30),
)
VALUES = ["", "0", "1", "30", "31", "-1", "1e400", "nan", "inf", "0x1", "1" * 10_000, "1.5",
          "\x00", " 1", "1 ", "+1", ".5", "5."]  # fmt: skip
query_text = st.one_of(
    st.sampled_from(VALUES).map(lambda v: "wait=" + quote(v, safe="")),
    st.lists(st.sampled_from(VALUES), min_size=2, max_size=3).map(
        lambda vs: "&".join("wait=" + quote(v, safe="") for v in vs)
    ),
    segment.map(lambda name: quote(name.encode("utf-8", "surrogatepass"), safe="") + "=1"),
    segment.map(lambda value: "wait=" + quote(value.encode("utf-8", "surrogatepass"), safe="")),
    st.sampled_from(["%zz", "%", "wait", "=1", "&&", "wait=1&&", "wait=%ff", "a=%ED%A0%80"]),
)
# Never empty: a route's own handler then runs, which the backend would answer.
query = st.one_of(query_text.map(str.encode), st.binary(min_size=1, max_size=40))
request = st.one_of(
    st.tuples(
        st.sampled_from(["GET", "DELETE", "PUT"]),
        segment.map(lambda s: "/v1/harvest/" + s),
        st.just(b""),
    ),  # fmt: skip
    st.tuples(st.sampled_from(["GET", "DELETE"]), st.just(f"/v1/harvest/{VALID_ID}"), query),
    st.tuples(st.sampled_from(["GET", "POST", "PUT"]), segment.map(lambda s: "/v1/" + s), query),
    st.tuples(st.just("GET"), st.just("/v1/models"), query),
    st.tuples(st.just("POST"), st.just("/v1/completions"), query),
)


async def call(app, method: str, path: str, query: bytes, secret: str):
    """One request through the ASGI app: (status, headers, body)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode("utf-8", "surrogatepass"),
        "query_string": query, "root_path": "", "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "headers": [(b"authorization", f"Bearer {secret}".encode()), (b"host", b"weft"),
                    (b"content-type", b"application/json")],
    }  # fmt: skip
    sent: list[dict] = []
    asked = 0
    never = asyncio.Event()

    async def receive():
        nonlocal asked
        asked += 1
        if asked == 1:
            return {"type": "http.request", "body": b"", "more_body": False}
        await never.wait()  # the client stays connected

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], headers, body


def test_it_answers_every_odd_path_and_query_in_the_envelope(make_user, settings_):
    secret = ApiKey.objects.create_key(make_user(), "odd paths")[1]
    app = V1Router(django_app=None)
    loop = asyncio.new_event_loop()
    statuses: dict[int, int] = {}

    @settings(max_examples=300, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(request)
    @example(("GET", "/v1/harvest/\x00", b""))
    @example(("DELETE", "/v1/harvest/\x00", b""))
    @example(("GET", "/v1/harvest/\ud800", b""))
    @example(("GET", "/v1/\ud800", b""))
    @example(("PUT", "/v1/harvest/\ud800\x00", b""))
    @example(("GET", "/v1/models", quote("\x00").encode() + b"=1"))
    @example(("GET", "/v1/harvest/" + "x" * 10_000, b""))
    @example(("GET", f"/v1/harvest/{VALID_ID}", b"wait=" + b"1" * 10_000))
    @example(("GET", f"/v1/harvest/{VALID_ID}", b"wait=%ED%A0%80"))
    def check(req) -> None:
        method, path, query = req
        status, headers, body = loop.run_until_complete(call(app, method, path, query, secret))
        statuses[status] = statuses.get(status, 0) + 1
        assert status in (400, 404, 405), (req, status, body[:300])
        assert headers["content-type"] == "application/json"
        envelope = json.loads(body)
        assert set(envelope) == {"error", "request_id"}
        assert envelope["request_id"] == headers["x-request-id"]
        error = envelope["error"]
        assert error["code"] in ("invalid_request", "not_found", "method_not_allowed",
                                 "job_not_found"), error  # fmt: skip
        # What the request sent is quoted in bounds, never as 10 kB of it.
        assert len(error["message"]) < 400 and len(str(error["param"])) < 100

    try:
        check()
    finally:
        loop.run_until_complete(asyncio.sleep(0.3))  # request rows are written after the answer
        loop.run_until_complete(close_connections())
        loop.run_until_complete(sync_to_async(connections.close_all)())
        loop.close()
    print(f"\nodd /v1 requests: {statuses}")
    assert {400, 404, 405} <= set(statuses)


@pytest.fixture
def settings_(settings):
    """A key's limits high enough for a few hundred requests in a few seconds."""
    settings.WEFT_API_RATE_PER_MINUTE = 100_000
    return settings
