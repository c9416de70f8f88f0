"""Batch upload files nobody would write (hypothesis): JSONL, CSV and text files of
good and bad lines mixed — NUL, lone surrogates, metadata nested deeper than the
bound, numbers of thousands of digits, NaN, a line that is not an object or has no
prompt, broken quoting, bytes that are not UTF-8, a BOM. Posted through /batch/new/
in-process, against the scripted engine (token counts). Never a 500; a refusal (a
400) names the line at fault and creates nothing; a batch made holds every prompt."""

import html
import json
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from batch.models import Batch, BatchItem
from tests.batch.conftest import upload

pytestmark = pytest.mark.django_db

text = st.one_of(
    st.sampled_from(
        [
            "fine",
            "a\x00b",
            "é 🦉",
            "",
            " ",
            "=1+1",
            '"quoted"',
            "a,b",
            "x" * 3000,
            "\u2028",
            "\r",
            "\\",
            "<b>",
        ]
    ),  # fmt: skip
    st.text(st.characters(exclude_categories=()), max_size=12),  # lone surrogates too
)
deep = st.integers(min_value=1, max_value=1500).map(lambda n: "[" * n + "]" * n)
raw_json = st.one_of(
    st.sampled_from(
        [
            "NaN",
            "Infinity",
            "1" * 5000,
            "1e999",
            "-0",
            "null",
            "true",
            "[]",
            "{}",
            '"\\ud800"',
            '"\\u0000"',
            '"a\\"b"',
        ]
    ),  # fmt: skip
    deep,
    text.map(lambda t: json.dumps(t, ensure_ascii=False)),  # lone surrogates fail to encode
)


def _json_string(value: str) -> str:
    return json.dumps(value)  # ASCII escapes: a lone surrogate as \ud8xx


jsonl_line = st.one_of(
    text.map(lambda t: json.dumps({"prompt": t})),
    st.tuples(text, raw_json).map(lambda p: '{"prompt": ' + _json_string(p[0]) + ', "m": ' + p[1] + "}"),
    raw_json.map(lambda v: '{"prompt": ' + v + "}"),
    raw_json,
    text,
    st.just('{"text": "no prompt"}'),
)  # fmt: skip
csv_cell = st.one_of(text, st.sampled_from(['"', '"a', 'a"b', '""', "a,b", "\n"]))
csv_line = st.lists(csv_cell, min_size=1, max_size=3).map(",".join)
FORMATS = {
    "jsonl": ("p.jsonl", jsonl_line, ""),
    "csv": ("p.csv", csv_line, "prompt,tag\n"),
    "text": ("p.txt", text, ""),
}


@st.composite
def files(draw):
    fmt = draw(st.sampled_from(sorted(FORMATS)))
    name, line, head = FORMATS[fmt]
    lines = draw(st.lists(line, min_size=0, max_size=6))
    body = head + draw(st.sampled_from(["\n", "\r\n"])).join(lines)
    data = body.encode("utf-8", "surrogatepass")  # a lone surrogate: bytes that are not UTF-8
    if draw(st.booleans()):
        data = draw(st.sampled_from([b"\xef\xbb\xbf", b"", b"\xff"])) + data
    return name, data


def outcome(response) -> tuple[int, str]:
    page = html.unescape(response.content.decode())
    errors = page[page.find('id="batch-errors"') :]
    errors = errors[: errors.find("</div>")] if 'id="batch-errors"' in page else ""
    return response.status_code, errors


@pytest.mark.usefixtures("engine")
def test_it_survives_generated_upload_files(client, make_user):
    user = make_user()
    client.force_login(user)
    seen: dict[str, int] = {}

    @settings(max_examples=120, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(files())
    @example(
        ("deep.jsonl", b'{"prompt": "a"}\n{"prompt": "b", "m": ' + b"[" * 1200 + b"]" * 1200 + b"}")
    )
    @example(("big.jsonl", b'{"prompt": "a", "n": ' + b"1" * 5000 + b"}"))
    @example(("nul.csv", b"prompt,tag\nok,1\nbad\x00,2\n"))
    def check(file) -> None:
        name, data = file
        batches, items = Batch.objects.count(), BatchItem.objects.count()
        response = upload(client, data, name)  # a 500 raises here
        status, errors = outcome(response)
        assert status in (302, 400), (file, status)
        if status == 302:
            seen["made"] = seen.get("made", 0) + 1
            batch = Batch.objects.latest("pk")
            assert batch.owner == user and batch.items.count() == batch.total > 0
            return
        seen["refused"] = seen.get("refused", 0) + 1
        assert (Batch.objects.count(), BatchItem.objects.count()) == (batches, items)
        # The line at fault, or a whole-file reason.
        assert re.search(r"line \d+: ", errors) or "the file holds no prompts" in errors, (
            file, errors[:500])  # fmt: skip

    check()
    print(f"\nbatch uploads: {seen}")
    assert seen.get("made") and seen.get("refused")
