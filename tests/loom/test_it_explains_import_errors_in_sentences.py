"""A refused import says what is wrong in words a person can act on, never the
JSON parser's own message; Weft's JSONL export is recognised under any name."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from loom.formats import exporters
from loom.formats.importers import ImportRefused, import_file
from loom.models import Tree
from tests.loom.conftest import tree_shape

pytestmark = pytest.mark.django_db

CASES = {
    "html": (b"<html>hello</html>", "a character JSON does not allow"),
    "single quotes": (b"{'root': {}}", "single quotes"),
    "misspelt word": (b'{"root": tru}', "only true, false and null"),
    "trailing comma": (b'{"root": {"text": "a",}}', "a comma before its closing brace"),
    "missing colon": (b'{"root" {}}', "not followed by a colon"),
    "missing comma": (b'{"a": 1 "b": 2}', "missing a comma"),
    "list comma": (b'{"root": [1 2]}', "a list is missing a comma"),
    "comment": (b"// my tree\n{}", "comment"),
    "not utf-8": (b'{"root": "\xff\xfe"}', "not UTF-8"),
    "bad number": (b'{"root": -}', "number written wrongly"),
    "two documents": (b'{"a": 1}\n{"b": 2}\n', "more than one JSON document"),
    "wrong type": (b'{"root": {"id": "r", "text": 5, "children": []}}', "must be a string, not a number"),
}  # fmt: skip
# What the parser says and a person should never see.
PARSER_WORDS = (
    "lexical error",
    "parse error",
    "yajl",
    "right here",
    "Extra data",
    "NoneType",
    "int",
)


@pytest.mark.parametrize("case", list(CASES))
def test_it_explains_a_bad_file_in_a_sentence(case, make_user):
    data, words = CASES[case]
    with pytest.raises(ImportRefused) as refused:
        import_file(make_user(), data, filename="tree.json")
    message = str(refused.value)
    assert words in message
    assert not any(w in message for w in PARSER_WORDS), message
    assert message.endswith(".")
    assert not Tree.objects.exists()


def test_it_imports_weft_jsonl_saved_under_a_json_name(make_tree):
    tree = make_tree(prompt="Root")
    a = tree.root.add_child(" one")
    a.add_child(" two")
    tree.root.add_child(" three")
    data = "".join(exporters.jsonl(tree)).encode()
    for name in ("nodes.json", "download", "tree.txt"):
        [copy] = import_file(tree.owner, data, filename=name)
        assert tree_shape(copy) == tree_shape(tree)


def test_it_names_the_line_of_a_broken_jsonl_file(make_tree):
    tree = make_tree(prompt="Root")
    tree.root.add_child(" one")
    lines = "".join(exporters.jsonl(tree)).splitlines()
    data = (lines[0] + "\n" + lines[1][:-5] + "\n").encode()
    with pytest.raises(ImportRefused) as refused:
        import_file(tree.owner, data, filename="nodes.json")
    assert str(refused.value) == "Line 2 ends early: it looks truncated."


def test_it_shows_the_sentence_on_the_trees_page(client, make_user):
    client.force_login(make_user())
    upload = SimpleUploadedFile("tree.json", b'{"root": {"text": "a",}}')
    response = client.post("/loom/import/", {"file": upload}, follow=True)
    assert "Import refused: The file is not valid JSON: an object has a key" in response.text


def test_it_still_refuses_a_json_object_per_line_that_is_not_weft(make_user):
    data = b"\n".join(json.dumps({"n": i}).encode() for i in range(3))
    with pytest.raises(ImportRefused, match="more than one JSON document"):
        import_file(make_user(), data, filename="other.json")


def test_it_imports_weft_jsonl_uploaded_as_json_through_the_page(client, make_tree):
    tree = make_tree(prompt="Root")
    tree.root.add_child(" one").add_child(" two")
    data = "".join(exporters.jsonl(tree)).encode()
    client.force_login(tree.owner)
    response = client.post(
        "/loom/import/", {"file": SimpleUploadedFile("nodes.json", data)}, follow=True
    )
    assert "Imported" in response.text and "Import refused" not in response.text
    copy = Tree.objects.exclude(pk=tree.pk).get()
    assert tree_shape(copy) == tree_shape(tree)
