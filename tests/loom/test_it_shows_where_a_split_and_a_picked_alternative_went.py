"""After a split from the document the reader shows the new child that holds the text
after the caret (and says so), not the upper half alone; a picked token alternative
keeps its model's one name (and colour) and offers to continue from it."""

import pytest

from loom.models import Author, Node
from loom.reading import reader_context
from tests.loom.conftest import shown_node

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_it_shows_the_tail_of_a_split_node(client, make_user, make_tree):
    user = make_user()
    tree = make_tree(user, prompt="The storm came in over the bay.")
    root = tree.root
    client.force_login(user)
    # From the document, with the reader on the node split (focus = that node).
    response = client.post(
        f"/loom/{tree.pk}/n/{root.pk}/split/", {"offset": 17, "focus": root.pk}, **HX
    )
    assert response.status_code == 200
    tail = Node.objects.get(parent=root)
    assert tail.text == " over the bay."
    assert shown_node(response) == tail.pk  # the text after the caret is on screen
    assert f"the text after the caret is now its child, node {tail.pk}, shown here" in response.text
    assert 'id="current-seg"' in response.text and " over the bay." in response.text

    # Split above the reader's node: the reader stays where it was (same text).
    child = tail.add_child(" Rain.")
    response = client.post(
        f"/loom/{tree.pk}/n/{root.pk}/split/", {"offset": 4, "focus": child.pk}, **HX
    )
    assert shown_node(response) == child.pk
    assert "is now its child" in response.text and "shown here" not in response.text


def test_it_keeps_one_model_name_for_a_picked_alternative(client, make_user, make_tree):
    user = make_user()
    tree = make_tree(user, prompt="Sky:")
    node = tree.root.add_child(
        " very blue",
        author=Author.MODEL,
        checkpoint="HuggingFaceTB/SmolLM2-135M-Instruct",
        params={"model": "smollm2-135m", "n": 2},
        logprobs={"tokens": [" very", " blue"], "token_logprobs": [-0.2, -0.3],
                  "top_logprobs": [{" very": -0.2, " so": -1.5}, {" blue": -0.3, " grey": -1.2}]},
    )  # fmt: skip
    client.force_login(user)
    response = client.post(
        f"/loom/{tree.pk}/n/{node.pk}/alternative/", {"index": 1, "token": " grey"}, **HX
    )
    assert response.status_code == 200
    picked = Node.objects.get(parent=tree.root, text=" very grey")
    assert picked.model_label() == node.model_label() == "smollm2-135m"
    ctx = reader_context(tree, tree.root)
    assert {c.model for c in ctx["children"]} == {"smollm2-135m"}
    assert len({c.colour for c in ctx["children"]}) == 1
    # It has no continuation: the notice offers one.
    assert "has no continuation yet" in response.text
    assert 'data-act="generate"' in response.text and "Continue from it" in response.text
