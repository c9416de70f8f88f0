"""Weft's own pyloom export of a tree 3,000 nodes deep (6,000 levels of JSON
nesting; json.loads gives up near 1,000) imports back as the same tree."""

import pytest

from loom.formats import exporters
from loom.formats.importers import import_file
from tests.loom.conftest import build_chain, tree_shape

pytestmark = pytest.mark.django_db

DEPTH = 3_000


def test_it_imports_its_own_3000_deep_pyloom_export(make_tree):
    tree = make_tree(prompt="start")
    chain = build_chain(tree, DEPTH, text=" {i}")
    chain[-1].toggle_bookmark()
    data = "".join(exporters.pyloom_json(tree)).encode()
    assert data.count(b'"children":[') == DEPTH + 1

    [back] = import_file(tree.owner, data, filename="deep.pyloom.json")
    assert tree_shape(back) == tree_shape(tree)
    assert len(tree_shape(back)) == DEPTH + 1
    assert back.title == "start"  # the root's text, not the file name
