"""Ratings (thumbs up / down, one undo step each) and the order of a node's children —
by rating, mean logprob, model or newest, thumbs-down hidden or not — remembered per
tree; ratings travel in Weft JSON (and JSONL) and MiniLoom's own field."""

import json
import re

import pytest

from loom.formats.exporters import jsonl, miniloom_json, weft_json
from loom.formats.importers import import_file
from loom.models import Author, Node, Tree
from loom.reading import reader_context
from loom.tree_views import outline_context
from loom.undo import undo_last
from tests.loom.conftest import shown_node

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def lp(*values):
    return {"tokens": [f" t{i}" for i in range(len(values))], "token_logprobs": list(values),
            "top_logprobs": [None] * len(values)}  # fmt: skip


@pytest.fixture
def family(make_user, make_tree):
    tree = make_tree(make_user(), prompt="Start")
    root = tree.root
    kids = {
        "a": root.add_child(" a", author=Author.MODEL, params={"model": "zeta"}, logprobs=lp(-2.0, -2.0)),
        "b": root.add_child(" b", author=Author.MODEL, params={"model": "alpha"}, logprobs=lp(-0.5)),
        "c": root.add_child(" c (by hand)"),
        "d": root.add_child(" d", author=Author.MODEL, params={"model": "alpha"}, logprobs=lp(-1.0, -9999.0)),
    }  # fmt: skip
    return tree, kids


def order(tree, node=None):
    tree.refresh_from_db()
    return [c.pk for c in reader_context(tree, node or tree.root)["children"]]


def test_it_rates_with_a_toggle_and_undoes_each(client, family):
    tree, kids = family
    client.force_login(tree.owner)
    url = f"/loom/{tree.pk}/n/{kids['a'].pk}/rate/"
    page = client.post(url, {"value": "up"}, **HX)
    assert page.status_code == 200 and shown_node(page) == kids["a"].pk
    assert Node.objects.get(pk=kids["a"].pk).rating == 1
    assert "▲ rated up" in page.text
    client.post(url, {"value": "up"}, **HX)  # again: cleared
    assert Node.objects.get(pk=kids["a"].pk).rating is None
    client.post(url, {"value": "down"}, **HX)
    assert Node.objects.get(pk=kids["a"].pk).rating == -1
    assert undo_last(tree)[0] == "rate thumbs down"
    assert Node.objects.get(pk=kids["a"].pk).rating is None
    assert undo_last(tree)[0] == "clear a rating"
    assert Node.objects.get(pk=kids["a"].pk).rating == 1
    bad = client.post(url, {"value": "sideways"}, **HX)
    assert bad.status_code == 422 and "up, down or none" in bad.text


def test_it_orders_children_and_remembers_it(client, family):
    tree, kids = family
    a, b, c, d = kids["a"].pk, kids["b"].pk, kids["c"].pk, kids["d"].pk
    kids["b"].rate(-1)
    kids["d"].rate(1)
    client.force_login(tree.owner)
    url = f"/loom/{tree.pk}/n/{tree.root.pk}/order/"

    assert order(tree) == [a, b, c, d]  # as placed
    client.post(url, {"order": "rating"}, **HX)
    assert order(tree) == [d, a, c, b]
    client.post(url, {"order": "logprob"}, **HX)
    assert order(tree) == [b, d, a, c]  # -0.5, -1.0 (the -inf left out), -2.0, none
    client.post(url, {"order": "model"}, **HX)
    assert order(tree) == [b, d, a, c]  # alpha, alpha, zeta, then the human one
    client.post(url, {"order": "newest"}, **HX)
    assert order(tree) == [d, c, b, a]
    page = client.post(url, {"order": "rating", "hide_down": "on"}, **HX)
    assert order(tree) == [d, a, c] and "(1 hidden)" in page.text
    assert Tree.objects.get(pk=tree.pk).child_order == "rating"  # remembered for the tree
    assert client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/").text.count('data-rating="1"') == 1

    # Siblings follow the shown order (↑ ↓), the node being read listed even if hidden.
    ctx = reader_context(Tree.objects.get(pk=tree.pk), Node.objects.get(pk=b))
    assert [s.id for s in ctx["siblings"]] == [d, a, c, b]
    assert ctx["nav"]["prev"] == c and ctx["nav"]["next"] == ""
    refused = client.post(url, {"order": "alphabet"}, **HX)
    assert refused.status_code == 422 and "Not changed" in refused.text

    # The outline and the reader's child list mark ratings.
    outline = outline_context(tree, tree.root)["outline"]["top"]
    assert {i.id: i.rating for i in outline.children}[d] == 1
    assert re.search(
        rf'data-id="{d}"[^>]*>\s*(<span[^>]*>new</span>\s*)?<span class="rate-mark up"', page.text
    )


def test_it_carries_ratings_in_weft_json_and_miniloom(family):
    tree, kids = family
    kids["a"].rate(1)
    kids["b"].rate(-1)
    for exporter, name in ((weft_json, "t.weft.json"), (jsonl, "t.nodes.jsonl"),
                           (miniloom_json, "t.miniloom.json")):  # fmt: skip
        data = "".join(exporter(tree))
        [back] = import_file(tree.owner, data.encode(), filename=name)
        got = {n.text: n.rating for n in back.nodes.all()}
        assert got[" a"] == 1 and got[" b"] == -1 and got[" c (by hand)"] is None, name
    mini = json.loads("".join(miniloom_json(tree)))["loomTree"]["nodeStore"]
    assert sorted(str(n["rating"]) for n in mini.values()) == [
        "False",
        "None",
        "None",
        "None",
        "True",
    ]
