import json

import pytest

from loom.formats import importers
from loom.formats.importers import ImportRefused, import_file
from loom.models import Node, Tree
from tests.loom.conftest import PYLOOM_DEMO

pytestmark = pytest.mark.django_db

CASES = {
    "truncated": (PYLOOM_DEMO.read_bytes()[:50_000], "truncated"),
    "not json": (b"<html>hello</html>", "not valid JSON"),
    "empty": (b"  ", "empty"),
    "unknown shape": (b'{"hello": 1}', "Unrecognised"),
    "bad text type": (b'{"root": {"id": "r", "text": 5, "children": []}}', "root.text (r) must be a string"),
    "children not a list": (b'{"root": {"id": "r", "text": "", "children": {}}}', "must be a list"),
    "duplicate id": (
        b'{"root": {"id": "r", "text": "", "children": [{"id": "r", "text": "x", "children": []}]}}',
        "appears twice",
    ),
    "missing parent": (
        json.dumps({"loomType": "Exoloom", "tree": {"rootNodeId": "a", "nodes": {
            "a": {"content": "x", "parentId": None}, "b": {"content": "y", "parentId": "zz"}}}}).encode(),
        "'zz' that is not in the file",
    ),
    "cycle": (
        json.dumps({"state": {"n.md": {"nodes": {
            "r": {"text": "root", "parentId": None},
            "a": {"text": "a", "parentId": "b"}, "b": {"text": "b", "parentId": "a"}}}}}).encode(),
        "cycle",
    ),
    "bad patch": (
        json.dumps({"loomTree": {"nodeStore": {"r": {"patch": "@@ nonsense", "parent": None, "children": []}}}}).encode(),
        "patch",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_it_refuses_a_bad_file_naming_the_problem_and_creates_nothing(case, make_user):
    user = make_user()
    data, words = CASES[case]
    with pytest.raises(ImportRefused) as refused:
        import_file(user, data, filename="x.json")
    assert words in str(refused.value)
    assert not Tree.objects.exists() and not Node.objects.exists()


def test_it_refuses_an_oversized_file(make_user, monkeypatch):
    monkeypatch.setattr(importers, "MAX_IMPORT_BYTES", 1000)
    with pytest.raises(ImportRefused, match="limit is 1,000 bytes"):
        import_file(make_user(), PYLOOM_DEMO.read_bytes())
    assert not Tree.objects.exists()


def test_it_rolls_back_when_a_later_note_is_bad(make_user):
    """Two notes, the second broken: the first is not left behind."""
    doc = {"state": {
        "good.md": {"nodes": {"r": {"text": "fine", "parentId": None}}},
        "bad.md": {"nodes": {"r": {"text": 7, "parentId": None}}},
    }}  # fmt: skip
    with pytest.raises(ImportRefused):
        import_file(make_user(), json.dumps(doc).encode())
    assert not Tree.objects.exists()


def test_it_shows_the_refusal_on_the_trees_page(client, make_user):
    client.force_login(make_user())
    upload = __import__("django.core.files.uploadedfile", fromlist=["x"]).SimpleUploadedFile(
        "broken.json", PYLOOM_DEMO.read_bytes()[:1000], content_type="application/json"
    )
    response = client.post("/loom/import/", {"file": upload}, follow=True)
    assert "Import refused" in response.text and "truncated" in response.text
    assert not Tree.objects.exists()
