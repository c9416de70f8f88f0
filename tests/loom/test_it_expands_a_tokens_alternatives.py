"""Expanding a token: one single-token child per top-k alternative (the sampled one
excepted), after a split right before the token (both halves keep their token
probabilities), or as siblings when it is the node's first token. One undo step."""

import math

import pytest

from core.tokens import chips_for
from loom.models import Author, Node
from loom.undo import redo_last, undo_last
from tests.loom.conftest import tree_shape

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
WORDS = [" the", " cat", " sat"]
LP = {
    "tokens": WORDS,
    "token_logprobs": [math.log(0.5), math.log(0.6), math.log(0.7)],
    "top_logprobs": [
        {" the": math.log(0.5), " a": math.log(0.3)},
        {" cat": math.log(0.6), " dog": math.log(0.2), " <owl>": math.log(0.1)},
        {" sat": math.log(0.7)},
    ],
    "text_offset": [0, 4, 8],
}


@pytest.fixture
def model_node(make_tree, client):
    tree = make_tree(prompt="Once")
    node = tree.root.add_child("".join(WORDS), author=Author.MODEL, checkpoint="ckpt", logprobs=LP)
    client.force_login(tree.owner)
    return tree, node


def expand(client, tree, node, index):
    return client.post(f"/loom/{tree.pk}/n/{node.pk}/expand/", {"index": index}, **HX)


def test_it_splits_before_the_token_and_adds_its_alternatives(client, model_node):
    tree, node = model_node
    before = tree_shape(tree)
    page = expand(client, tree, node, 1)
    assert page.status_code == 200
    head = Node.objects.get(pk=node.pk)
    assert head.text == " the"
    kids = [(c.text, c.author) for c in head.children()]
    assert kids == [(" cat sat", "model"), (" dog", "model"), (" <owl>", "model")]
    # Both halves of the split keep their probabilities; each new child has its own.
    assert [c.text for c in chips_for(head.text, head.logprobs)] == [" the"]
    tail = head.children()[0]
    assert [c.text for c in chips_for(tail.text, tail.logprobs)] == [" cat", " sat"]
    dog = head.children()[1]
    assert dog.logprobs["token_logprobs"] == [math.log(0.2)] and dog.checkpoint == "ckpt"
    assert "&lt;owl&gt;" in page.text and "<owl>" not in page.text
    assert undo_last(tree)[0] == "expand 2 alternatives"
    assert tree_shape(tree) == before
    assert Node.objects.get(pk=node.pk).logprobs == LP
    redo_last(tree)
    assert [c.text for c in Node.objects.get(pk=node.pk).children()] == [
        " cat sat",
        " dog",
        " <owl>",
    ]


def test_it_adds_siblings_for_the_first_token(client, model_node):
    tree, node = model_node
    assert expand(client, tree, node, 0).status_code == 200
    assert [c.text for c in tree.root.children()] == ["".join(WORDS), " a"]


@pytest.mark.parametrize(
    "index, message", [(2, "no alternatives"), (9, "not one of"), ("x", "whole number")]
)
def test_it_refuses_what_cannot_be_expanded(client, model_node, index, message):
    tree, node = model_node
    before = tree_shape(tree)
    page = expand(client, tree, node, index)
    assert page.status_code == 422 and message in page.text
    assert tree_shape(tree) == before


def test_it_expands_only_ones_own_nodes(client, model_node, make_user):
    tree, node = model_node
    client.force_login(make_user())
    assert expand(client, tree, node, 1).status_code == 404
    assert Node.objects.get(pk=node.pk).text == "".join(WORDS)
