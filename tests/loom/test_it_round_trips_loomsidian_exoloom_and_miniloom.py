"""Export to each flat format, import the file back: the same tree (text and
structure, and what each format can carry: authors, bookmarks, archive marks)."""

import json

import pytest

from loom.formats import exporters
from loom.formats.importers import import_file
from loom.models import Author, Node
from tests.loom.conftest import PYLOOM_DEMO, build_chain

pytestmark = pytest.mark.django_db

# What each format keeps besides text and structure (depth and sibling order).
KEPT = {
    "loomsidian": ("bookmarked",),
    "exoloom": ("author", "bookmarked", "archived"),
    "miniloom": ("author",),
}


def shape(tree, fmt):
    return [
        (depth, row["text"], *(row[k] for k in KEPT[fmt]))
        for depth, row in Node.objects.preorder(tree)
    ]


def export(tree, fmt) -> bytes:
    return "".join(exporters.TREE_EXPORTERS[fmt](tree)).encode()


@pytest.fixture
def mixed(make_tree):
    """Siblings out of id order, model and human nodes, a bookmark, an archived
    node, an empty segment, HTML, newlines and non-ASCII text."""
    tree = make_tree(prompt="Root <b>text</b>\n", title="Mixed tree")
    root = tree.root
    a = root.add_child(" the model", author=Author.MODEL, checkpoint="weft/scripted-tiny")
    b = root.add_child(" ünïcode\nline")
    a.add_child("")
    deep = a.add_child(" abcd")
    deep.add_child("cd")  # an appended segment that repeats the tail it extends
    deep.add_child(" x" * 50)
    b.toggle_bookmark()
    a.toggle_archive()
    Node.objects.filter(pk=b.pk).update(position=0)
    Node.objects.filter(pk=a.pk).update(position=1)
    tree.current = deep
    tree.save()
    return tree


@pytest.mark.parametrize("fmt", list(KEPT))
def test_it_round_trips_a_mixed_tree(fmt, mixed):
    data = export(mixed, fmt)
    [copy] = import_file(mixed.owner, data, filename=f"x.{fmt}.json")
    assert shape(copy, fmt) == shape(mixed, fmt)
    assert len(shape(copy, fmt)) == 7
    # The current node comes back as the current node (loomsidian and MiniLoom keep it).
    if fmt != "exoloom":
        assert Node.objects.get(pk=copy.current_id).text == " abcd"
    # A second round trip writes the same file: nothing drifts.
    again = export(copy, fmt)
    assert _stable(json.loads(again), fmt) == _stable(json.loads(data), fmt)


def _stable(doc, fmt):
    """The document without what a re-import renews (ids, timestamps)."""
    text = json.dumps(doc, sort_keys=True)
    return len(text), text.count('"text"'), text.count('"patch"'), text.count("LLM")


@pytest.mark.parametrize("fmt", list(KEPT))
def test_it_round_trips_the_pyloom_demo(fmt, make_user):
    [tree] = import_file(make_user(), PYLOOM_DEMO.read_bytes(), filename="demo.json")
    [copy] = import_file(tree.owner, export(tree, fmt), filename=f"demo.{fmt}.json")
    assert shape(copy, fmt) == shape(tree, fmt)
    assert len(shape(copy, fmt)) == 764


@pytest.mark.parametrize("fmt", list(KEPT))
def test_it_round_trips_a_3000_deep_chain_in_linear_work(fmt, make_tree):
    tree = make_tree(prompt="start")
    build_chain(tree, 3000, text=" word{i}")
    data = export(tree, fmt)
    # MiniLoom's patches carry a few characters of context each, not the path's text.
    assert len(data) < 3001 * 400
    [copy] = import_file(tree.owner, data, filename=f"chain.{fmt}.json")
    assert shape(copy, fmt) == shape(tree, fmt)


def test_it_offers_the_three_formats_on_the_export_route(client, mixed):
    client.force_login(mixed.owner)
    for fmt in KEPT:
        response = client.get(f"/loom/{mixed.pk}/export/{fmt}/")
        assert response.status_code == 200
        body = b"".join(response.streaming_content)
        assert json.loads(body)
        assert f'.{fmt}.json"' in response["Content-Disposition"]


def test_it_round_trips_a_miniloom_node_that_rewrites_its_parent(make_user):
    from diff_match_patch import diff_match_patch

    dmp = diff_match_patch()

    def patch(a, b):
        return dmp.patch_toText(dmp.patch_make(a, b))

    store = {
        "r": {"id": "r", "type": "root", "patch": patch("", "Hello world"), "parent": None,
              "children": ["w", "k"]},
        "w": {"id": "w", "type": "rewrite", "patch": patch("Hello world", "Goodbye world!"),
              "parent": "r", "children": ["g"]},
        "g": {"id": "g", "type": "gen", "patch": patch("Goodbye world!", "Goodbye world! Again."),
              "parent": "w", "children": []},
        "k": {"id": "k", "type": "user", "patch": patch("Hello world", "Hello world, kept."),
              "parent": "r", "children": []},
    }  # fmt: skip
    doc = {"loomTree": {"nodeStore": store}, "focus": {"id": "g"}}
    [tree] = import_file(make_user(), json.dumps(doc).encode(), filename="m.json")
    [copy] = import_file(tree.owner, export(tree, "miniloom"), filename="m2.json")
    full = {n.source_id: n.full_text() for n in copy.nodes.all()}
    texts = {n.source_id: n.extra.get("full_text") for n in copy.nodes.all()}
    assert texts["w"] == "Goodbye world!"
    assert full["k"] == "Hello world, kept."
    assert shape(copy, "miniloom") == shape(tree, "miniloom")
