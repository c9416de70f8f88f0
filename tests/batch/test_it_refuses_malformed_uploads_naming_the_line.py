"""A malformed prompt file is refused with a message naming the line, per format,
and nothing is created or sent."""

import html
import json

import pytest

from batch.models import Batch, BatchItem
from completions.models import Generation
from tests.batch.conftest import upload

pytestmark = pytest.mark.django_db

GOOD = json.dumps({"prompt": "fine"})

CASES = [
    ("bad.jsonl", f"{GOOD}\n{GOOD}\n{{not json\n", "line 3: not JSON"),
    ("bad.jsonl", f"{GOOD}\n\n" + json.dumps({"text": "x"}), 'line 3: no "prompt" field'),
    ("bad.jsonl", json.dumps({"prompt": 7}), 'line 1: "prompt" must be a string, not a number'),
    ("bad.jsonl", f"{GOOD}\n[1, 2]", "line 2: not a JSON object"),
    ("bad.jsonl", f'{GOOD}\n{{"prompt": "a", "score": NaN}}', "line 2: not JSON (NaN"),
    ("bad.jsonl", f'{GOOD}\n{{"prompt": "a\\u0000b"}}', "line 2: the prompt contains a NUL"),
    ("bad.jsonl", '{"prompt": "a", "k": "\\ud800"}', "line 1: a metadata field contains an unpaired"),
    ("bad.csv", "id,text\n1,hello\n", 'line 1: no "prompt" column'),
    ("bad.csv", "id,prompt\n1,hello\n2,one,two\n", "line 3: 3 fields where the header has 2"),
    ("bad.csv", 'id,prompt\n1,"hello\n2,x\n', "line 2: not CSV"),
    ("bad.txt", "first\nsec\x00ond\n", "line 2: the prompt contains a NUL"),
    ("bad.txt", b"first\nsecond\n\xff\xfe third\n", "line 3: not UTF-8"),
    ("empty.txt", "\n\n  \n", "the file holds no prompts"),
    ("many.txt", "p\n" * 10_001, "line 10001: more than 10,000 prompts"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "content", "expected"), CASES)
def test_it_refuses_malformed_uploads_naming_the_line(
    engine, client, make_user, name, content, expected
):
    client.force_login(make_user())
    response = upload(client, content, name)
    assert response.status_code == 400
    text = html.unescape(response.content.decode())
    assert expected in text, text[text.find("batch-errors") :][:600]
    assert "Nothing was sent" in text or "nothing was sent" in text
    assert Batch.objects.count() == 0 and BatchItem.objects.count() == 0
    assert Generation.objects.count() == 0
    assert engine.completions() == []


def test_it_refuses_bad_settings_and_a_prompt_too_long_for_the_context(engine, client, make_user):
    client.force_login(make_user())
    response = upload(client, "a prompt\n", "p.txt", n="abc")
    assert response.status_code == 400
    assert "n: 'abc' is not an integer" in html.unescape(response.content.decode())
    # The scripted model's context is 2,048 tokens by default: line 2 passes it.
    long = "word " * 2100
    response = upload(client, f"short\n{long}\n", "p.txt", max_tokens="16")
    text = html.unescape(response.content.decode())
    assert response.status_code == 400 and "line 2: the prompt is" in text, text[-2000:]
    assert "passes the model's context" in text
    assert Batch.objects.count() == 0 and engine.completions() == []


def test_it_reads_each_format_with_its_metadata(engine, client, make_user, settings):
    settings.WEFT_GENERATION_QUEUE = "batch-nobody-listens"
    client.force_login(make_user())
    jsonl = "\n".join(
        json.dumps({"prompt": f"p{i}\u2028x", "id": i, "tags": ["a"]}) for i in range(3)
    )
    assert upload(client, jsonl, "a.jsonl").status_code == 302
    assert (
        upload(client, 'id,prompt,label\n1,"one, two",x\n2,"multi\nline",y\n', "b.csv").status_code
        == 302
    )
    assert upload(client, "alpha\n\nbeta\r\n", "c.txt").status_code == 302
    a, b, c = Batch.objects.order_by("pk")
    assert [(i.prompt, i.metadata, i.line) for i in a.items.all()] == [
        (f"p{i}\u2028x", {"id": i, "tags": ["a"]}, i + 1) for i in range(3)
    ]
    assert [(i.prompt, i.metadata, i.line) for i in b.items.all()] == [
        ("one, two", {"id": "1", "label": "x"}, 2),
        ("multi\nline", {"id": "2", "label": "y"}, 3),
    ]
    assert [(i.prompt, i.line) for i in c.items.all()] == [("alpha", 1), ("beta", 3)]
    assert (
        a.params["max_tokens"] == 8
        and a.params["logprobs"] == 0
        and a.params["model"] == "scripted"
    )
