import json

import pytest

from loom.formats.importers import import_file
from loom.models import Node
from tests.loom.conftest import PYLOOM_DEMO

pytestmark = pytest.mark.django_db


def file_shape(root):
    """[(depth, id, text, child count)] in preorder, read straight from the file."""
    out, stack = [], [(root, 0)]
    while stack:
        node, depth = stack.pop()
        out.append((depth, node["id"], node["text"], len(node["children"])))
        stack.extend((c, depth + 1) for c in reversed(node["children"]))
    return out


def test_it_imports_every_node_text_and_the_whole_structure(make_user):
    raw = PYLOOM_DEMO.read_bytes()
    expected = file_shape(json.loads(raw)["root"])
    assert len(expected) == 764 and max(d for d, *_ in expected) == 21

    [tree] = import_file(make_user(), raw, filename="pyloom_demo.json")

    got = []
    kids = {}
    for depth, row in Node.objects.preorder(tree):
        kids[row["parent_id"]] = kids.get(row["parent_id"], 0) + 1
        got.append((depth, row["source_id"], row["text"], row["id"]))
    assert [(d, i, t) for d, i, t, _ in expected] == [(d, i, t) for d, i, t, _ in got]
    assert [n for *_, n in expected] == [kids.get(pk, 0) for *_, pk in got]
    # The file's selected node becomes the tree's current node.
    selected = json.loads(raw)["selected_node_id"]
    assert Node.objects.get(pk=tree.current_id).source_id == selected
