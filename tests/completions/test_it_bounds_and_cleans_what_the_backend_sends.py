"""Values from the backend are bounded and cleaned at the door: an over-long request id,
error code or model, a NUL in a message, a Retry-After of inf / negative / huge / an
HTTP date, a malformed choice — each run still ends in a clear terminal state with its
reservation released, never stuck "running" (then "interrupted") by a failed save."""

import pytest

from completions import pipeline
from completions.budget import usage_summary
from completions.client import forget_backend_cache
from completions.errors import parse_retry_after
from completions.models import Generation
from tests.completions.hostile import Answer, HostileBackend, choice_frame

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "x" * 5000
DONE = [choice_frame("Hello"), choice_frame(" world", finish="length"), b"[DONE]"]


@pytest.fixture
def hostile(settings, unconsumed_queue):
    backend = HostileBackend()
    settings.WEFT_BACKEND_URL = f"{backend.url}/v1"
    settings.WEFT_BACKEND_MAX_RETRIES = 0
    forget_backend_cache()
    yield backend
    backend.close()
    forget_backend_cache()


def run(user, *, stream: bool = True) -> Generation:
    body = {"model": "hostile", "prompt": "Hi", "max_tokens": 2}
    if not stream:
        return pipeline.run_now(user, body)
    generation = pipeline.start(user, body, kind="workbench")
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    return generation


def error(code: str = "upstream_unavailable", message: str = "busy") -> dict:
    return {"error": {"code": code, "message": message, "type": "server_error"}}


CASES = {
    "long request id on a stream": (
        Answer(headers={"X-Request-Id": LONG, "X-Acs-Upstream-Model": LONG}, frames=DONE),
        "done",
    ),
    "non-string model in a chunk": (
        Answer(frames=[{**choice_frame("Hi", finish="length"), "model": {"a": 1}}, b"[DONE]"]),
        "done",
    ),
    "long request id on an error": (
        Answer(503, {"X-Request-Id": LONG, "Retry-After": "1"}, error()),
        "failed",
    ),
    "long error code": (Answer(503, {}, error(code=LONG)), "failed"),
    "NUL in the error message": (Answer(503, {}, error(message="bad\x00thing")), "failed"),
    "Retry-After inf": (Answer(503, {"Retry-After": "inf"}, error()), "failed"),
    "Retry-After nan": (Answer(503, {"Retry-After": "nan"}, error()), "failed"),
    "Retry-After negative": (Answer(503, {"Retry-After": "-5"}, error()), "failed"),
    "Retry-After huge": (Answer(503, {"Retry-After": "1e30"}, error()), "failed"),
    "Retry-After naive HTTP date": (
        Answer(503, {"Retry-After": "Wed, 21 Oct 2099 07:28:00 -0000"}, error()),
        "failed",
    ),
    "choice index out of range": (
        Answer(frames=[choice_frame("Hi", index=5, finish="length"), b"[DONE]"]),
        "failed",
    ),
    "lone surrogate in the text": (
        Answer(
            frames=[
                b'{"choices":[{"index":0,"text":"a\\ud800b","finish_reason":"length"}]}',
                b"[DONE]",
            ]
        ),  # fmt: skip
        "done",
    ),
}


@pytest.mark.parametrize("stream", [True, False], ids=["worker", "run_now"])
@pytest.mark.parametrize("case", list(CASES))
def test_it_ends_the_run_cleanly(hostile, make_user, case, stream):
    answer, expected = CASES[case]
    if answer.frames is not None and not stream:
        pytest.skip("a streamed answer")
    hostile.answer = answer
    user = make_user()
    generation = run(user, stream=stream)
    assert generation.state == expected, (generation.error_code, generation.error_message)
    assert len(generation.request_id) <= 200
    assert len(generation.error_code) <= 100
    assert len(generation.served_model) <= 300
    assert "\x00" not in generation.error_message
    assert generation.retry_after_seconds is None or 0 <= generation.retry_after_seconds <= 86400
    assert usage_summary(user)["reserved"] == 0
    if expected == "failed" and answer.status == 200:
        assert generation.error_code == "bad_stream"
    if case == "lone surrogate in the text":
        assert generation.choices[0]["text"] == "a\ufffdb"


@pytest.mark.parametrize(
    ("header", "expected"),
    [("7", 7.0), ("0", 0.0), ("inf", None), ("-inf", None), ("nan", None), ("-1", None),
     ("1e30", 86400.0), ("soon", None), ("Wed, 21 Oct 2015 07:28:00 -0000", 0.0),
     ("9" * 5000, None), ("Wed, 21 Oct 99999 07:28:00 GMT", None)],
)  # fmt: skip
def test_it_parses_retry_after_into_a_bounded_number(header, expected):
    assert parse_retry_after(header) == expected
