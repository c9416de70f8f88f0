import json

import pytest

from loom.formats.importers import import_file
from loom.models import Author, Node
from tests.loom.conftest import FIXTURES

pytestmark = pytest.mark.django_db


def preorder(tree):
    return [(d, r) for d, r in Node.objects.preorder(tree)]


def test_it_imports_loomsidian_notes(make_user):
    trees = import_file(
        make_user(), (FIXTURES / "loomsidian.json").read_bytes(), filename="data.json"
    )
    assert [t.title for t in trees] == ["Lighthouse", "empty-ish"]
    nodes = preorder(trees[0])
    assert [(d, r["text"]) for d, r in nodes] == [
        (0, "The lighthouse keeper counted the ships"),
        (1, " every night, though none had passed in years."),
        (2, " One evening a light answered."),
        (1, " until the fog <b>swallowed</b> the bay."),
    ]
    assert [r["bookmarked"] for _, r in nodes] == [False, True, False, False]
    current = Node.objects.get(pk=trees[0].current_id)
    assert current.source_id == "7b1c2a10-4a77-4f0e-9a6e-0c1f5e2d9a03"
    assert [r["text"] for _, r in preorder(trees[1])] == ["A second note"]


def test_it_imports_an_exoloom_export(make_user):
    [tree] = import_file(make_user(), (FIXTURES / "exoloom.json").read_bytes())
    assert tree.title == "Garden of forking paths"
    nodes = preorder(tree)
    # childrenIds order is kept: n-b before n-a.
    assert [(d, r["source_id"], r["text"]) for d, r in nodes] == [
        (0, "n-root", "In the garden, the paths"),
        (1, "n-b", " lead nowhere & everywhere."),
        (1, "n-a", " fork at every hedge."),
        (2, "n-a1", " I chose the left one."),
    ]
    by = {r["source_id"]: r for _, r in nodes}
    assert by["n-a"]["author"] == Author.MODEL and by["n-a"]["checkpoint"] == "llama-405b"
    assert by["n-root"]["author"] == Author.HUMAN
    assert by["n-a1"]["bookmarked"] and by["n-b"]["archived"]


def test_it_imports_miniloom_by_applying_its_patches(make_user):
    [tree] = import_file(make_user(), (FIXTURES / "miniloom.json").read_bytes(), filename="m.json")
    expected = json.loads((FIXTURES / "miniloom_expected.json").read_text())
    by = {r["source_id"]: r for _, r in preorder(tree)}
    # Appending children: the path text equals MiniLoom's full text.
    for key in ("root", "a", "b", "a1"):
        node = Node.objects.get(pk=by[key]["id"])
        assert node.full_text() == expected[key]
    assert by["a"]["author"] == Author.MODEL and by["a"]["checkpoint"] == "llama-8b"
    # A rewrite of its parent keeps its exact text in extra.
    assert by["b1"]["extra"]["full_text"] == expected["b1"]
    assert Node.objects.get(pk=tree.current_id).source_id == "a1"
