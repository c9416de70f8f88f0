"""An imported tree takes the file's own title, else the first words of its text (the
root's, or the first below an empty root), never the file name it happened to have;
a plain .txt file becomes a one-node tree."""

import json

import pytest

from loom.formats.exporters import jsonl, miniloom_json, pyloom_json
from loom.formats.importers import ImportRefused, import_file
from tests.loom.conftest import FIXTURES, PYLOOM_DEMO

pytestmark = pytest.mark.django_db


def test_it_titles_pyloom_miniloom_and_jsonl_by_their_text(make_user, make_tree):
    user = make_user()
    [demo] = import_file(user, PYLOOM_DEMO.read_bytes(), filename="pyloom_demo.json")
    # The demo's root is empty: the first text below it (in preorder) names the tree.
    stack = [json.loads(PYLOOM_DEMO.read_text())["root"]]
    while not (node := stack.pop())["text"].strip():
        stack.extend(reversed(node["children"]))
    words = " ".join(node["text"].split())
    assert demo.title == (words[:60] + "…" if len(words) > 60 else words)
    assert "pyloom_demo" not in demo.title

    tree = make_tree(user, prompt="The ferryman counted the coins twice")
    tree.root.add_child(" and said nothing.")
    for exporter, name in ((pyloom_json, "loom.json"), (miniloom_json, "loom (3).json"),
                           (jsonl, "nodes.jsonl")):  # fmt: skip
        [back] = import_file(user, "".join(exporter(tree)).encode(), filename=name)
        assert back.title == "The ferryman counted the coins twice", name

    # A file with a title of its own keeps it.
    [exo] = import_file(user, (FIXTURES / "exoloom.json").read_bytes(), filename="x.json")
    assert exo.title == "Garden of forking paths"


def test_it_imports_a_text_file_as_a_one_node_tree(make_user):
    user = make_user()
    text = "Chapter one\r\n\r\nThe rain had not stopped for a week.\n"
    [tree] = import_file(user, text.encode(), filename="draft.txt")
    assert tree.nodes.count() == 1
    assert tree.root.text == "Chapter one\n\nThe rain had not stopped for a week.\n"
    assert tree.title == "Chapter one The rain had not stopped for a week."
    assert tree.current_id == tree.root.pk
    with pytest.raises(ImportRefused, match="not UTF-8"):
        import_file(user, b"\xff\xfe\x00bad", filename="bad.txt")


def test_it_imports_a_text_file_through_the_page(client, make_user):
    user = make_user()
    client.force_login(user)
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("notes.txt", b"Once, in a harbour town,", "text/plain")
    response = client.post("/loom/import/", {"file": upload})
    assert response.status_code == 302
    tree = user.loom_trees.get()
    assert tree.root.text == "Once, in a harbour town," and tree.title == "Once, in a harbour town,"
