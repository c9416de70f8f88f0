import json

import pytest

from loom.formats import exporters
from loom.formats.importers import import_file
from loom.models import Author, Node
from tests.loom.conftest import PYLOOM_DEMO, tree_shape

pytestmark = pytest.mark.django_db

COMPARED = [
    "position", "text", "author", "checkpoint", "request_id", "params", "seed",
    "finish_reason", "logprobs", "created_at", "visited_at", "bookmarked", "tags",
    "archived", "source_id", "extra",
]  # fmt: skip


def rows(tree):
    return [(d, {k: r[k] for k in COMPARED}) for d, r in Node.objects.preorder(tree)]


def test_it_round_trips_weft_json_identically(make_tree):
    tree = make_tree(prompt="Root <i>text</i>", title="RT")
    tree.settings = {"n": 4, "temperature": 0.7}
    tree.save()
    root = tree.root
    a = root.add_child(
        " model says",
        author=Author.MODEL,
        checkpoint="weft/scripted-tiny",
        request_id="cmpl-1",
        params={"max_tokens": 3, "seed": 7},
        seed=7,
        finish_reason="length",
        logprobs={"tokens": [" model", " says"], "token_logprobs": [-0.1, -2.0],
                  "top_logprobs": [{" model": -0.1}, {" says": -2.0, " said": -2.1}],
                  "text_offset": [0, 6]},
    )  # fmt: skip
    a.toggle_bookmark()
    b = root.add_child(" human\nwrites ünïcode")
    Node.objects.filter(pk=b.pk).update(tags=["x"], archived=True)
    b.add_child("")

    data = "".join(exporters.weft_json(tree)).encode()
    [copy] = import_file(tree.owner, data)
    assert rows(copy) == rows(tree)
    assert (copy.title, copy.settings, copy.extra) == (tree.title, tree.settings, tree.extra)
    again = "".join(exporters.weft_json(copy))

    def strip(text):
        return [
            {k: v for k, v in n.items() if k not in ("id", "parent_id")}
            for n in json.loads(text)["nodes"]
        ]

    assert strip(again) == strip(data)


def test_it_round_trips_pyloom_texts_and_structure(make_user):
    user = make_user()
    [first] = import_file(user, PYLOOM_DEMO.read_bytes(), filename="demo.json")
    exported = "".join(exporters.pyloom_json(first))
    doc = json.loads(exported)
    assert {"root", "chapters", "canonical", "summaries", "tags", "selected_node_id"} <= set(doc)
    [second] = import_file(user, exported.encode(), filename="demo2.json")
    assert tree_shape(second) == tree_shape(first)
    # Ids survive too, so pyloom's chapters and selection still point at the right nodes.
    assert [r["source_id"] for _, r in Node.objects.preorder(second)] == [
        r["source_id"] for _, r in Node.objects.preorder(first)
    ]
