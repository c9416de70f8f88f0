"""A number ijson's C parser cannot build — an integer past Python's 4,300-digit
limit, an exponent past Decimal's — was a 500 ("SystemError: Events.__next__ returned
a result with an exception set"). Each is now a refusal naming the field it is in,
whatever the format, and nothing is imported; digits in a string still import."""

import html
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from loom.models import Node, Tree

pytestmark = pytest.mark.django_db

LONG = "1" * 5_000
HUGE_EXPONENT = "1e99999999999999999999"


def weft(position: str = "0", extra: str = "{}") -> bytes:
    nodes = [
        '{"id": 1, "parent_id": null, "text": "root"}',
        f'{{"id": 2, "parent_id": 1, "text": "child", "position": {position}, "extra": {extra}}}',
    ]
    return (
        '{"format": "weft-loom", "version": 1, "tree": {"title": "t"}, "nodes": ['
        + ", ".join(nodes)
        + "]}"
    ).encode()


def jsonl(seed: str) -> bytes:
    return (
        '{"id": 1, "parent_id": null, "text": "root"}\n'
        f'{{"id": 2, "parent_id": 1, "text": "child", "seed": {seed}}}\n'
    ).encode()


def pyloom(value: str) -> bytes:
    return ('{"root": {"id": "a", "text": "root", "children": [], "meta": {"n": ' + value
            + "}}}").encode()  # fmt: skip


def exoloom(value: str) -> bytes:
    return (
        '{"loomType": "Exoloom", "tree": {"rootNodeId": "r", "nodes": {"r": {"content": "x", '
        '"authorType": "USER", "createdAt": ' + value + "}}}}"
    ).encode()


CASES = {
    "weft position of 5,000 digits": (weft(position=LONG), "t.json", "position", "too long"),
    "weft negative position": (weft(position="-" + LONG), "t.json", "position", "too long"),
    "weft exponent": (weft(position=HUGE_EXPONENT), "t.json", "position", "exponent"),
    "weft number in a list": (
        weft(extra='{"scores": [1, ' + LONG + "]}"),
        "t.json",
        "scores",
        "too long",
    ),  # fmt: skip
    "jsonl seed": (jsonl(LONG), "t.nodes.jsonl", "seed", "too long"),
    "pyloom": (pyloom(LONG), "p.json", "n", "too long"),
    "exoloom": (exoloom("-" + HUGE_EXPONENT), "e.json", "createdAt", "exponent"),
}


def post(client, data: bytes, name: str) -> str:
    page = client.post("/loom/import/", {"file": SimpleUploadedFile(name, data)}, follow=True)
    assert page.status_code == 200
    return html.unescape(page.content.decode())


@pytest.mark.parametrize("case", list(CASES))
def test_it_refuses_the_number_naming_its_field(case, client, make_user):
    data, name, field, words = CASES[case]
    client.force_login(make_user())
    text = post(client, data, name)
    assert "Import refused" in text and f"in '{field}'" in text and words in text, text[-3000:]
    assert not Tree.objects.exists() and not Node.objects.exists()


def test_it_imports_thousands_of_digits_in_a_string(client, make_user):
    client.force_login(make_user())
    data = json.dumps({"format": "weft-loom", "version": 1, "tree": {"title": "pi"}, "nodes": [
        {"id": 1, "parent_id": None, "text": "3." + LONG}, {"id": 2, "parent_id": 1, "text": LONG,
        "position": 4}]}).encode()  # fmt: skip
    text = post(client, data, "pi.json")
    assert "Imported" in text, text[-2000:]
    node = Node.objects.get(position=4)
    assert node.text == LONG and node.parent.text == "3." + LONG
