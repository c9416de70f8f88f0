"""Writing in the document (POST …/write/): changed segments edit their nodes or make
edited siblings (the tree's write mode), text after the end becomes a human child,
all as one undo step; bad input is refused with a sentence and changes nothing."""

import json

import pytest

from loom.models import Author, Node, Tree, WriteMode
from loom.undo import undo_last
from tests.loom.conftest import shown_node

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def write(client, tree, node, **data):
    if "edits" in data and not isinstance(data["edits"], str):
        data["edits"] = json.dumps(data["edits"])
    return client.post(f"/loom/{tree.pk}/n/{node.pk}/write/", data, **HX)


@pytest.fixture
def story(make_tree, client):
    tree = make_tree(prompt="The house")
    a = tree.root.add_child(" stood", author=Author.MODEL)
    b = a.add_child(" on a hill.")
    client.force_login(tree.owner)
    return tree, a, b


def test_it_edits_segments_in_place_and_appends_a_child(client, story):
    tree, a, b = story
    page = write(
        client, tree, b, edits=[{"node": a.pk, "text": " leaned"}], append=" It <b>fell</b>."
    )
    assert page.status_code == 200
    assert Node.objects.get(pk=a.pk).text == " leaned"
    new = Node.objects.get(parent=b, text=" It <b>fell</b>.")
    assert new.author == Author.HUMAN and new.visited_at is not None
    assert shown_node(page) == new.pk
    assert "It &lt;b&gt;fell&lt;/b&gt;." in page.text and "<b>fell" not in page.text
    # One undo step for the whole save.
    assert undo_last(tree)[0] == "write in the text"
    assert (
        Node.objects.get(pk=a.pk).text == " stood" and not Node.objects.filter(pk=new.pk).exists()
    )


def test_it_makes_an_edited_sibling_in_sibling_mode(client, story):
    tree, a, b = story
    client.post(f"/loom/{tree.pk}/write-mode/", {"mode": "sibling"}, **HX)
    assert Tree.objects.get(pk=tree.pk).write_mode == WriteMode.SIBLING
    page = write(client, tree, b, edits=[{"node": a.pk, "text": " fell"}])
    assert page.status_code == 200
    assert Node.objects.get(pk=a.pk).text == " stood"  # kept
    sibling = Node.objects.get(parent=tree.root, text=" fell")
    assert shown_node(page) == sibling.pk
    # Two changes at once cannot both become siblings.
    refused = write(client, tree, b, edits=[{"node": a.pk, "text": " x"}], append=" y")
    assert refused.status_code == 422 and "one at a time" in refused.text
    assert refused["HX-Reswap"] == "none"


@pytest.mark.parametrize(
    "data, message",
    [
        ({}, "Nothing changed"),
        ({"edits": "not json"}, "could not be read"),
        ({"edits": json.dumps({"node": 1})}, "at most"),
        ({"edits": json.dumps([{"node": "x", "text": "a"}])}, "whole number"),
        ({"edits": json.dumps([{"node": 1, "text": 3}])}, "could not be read"),
        ({"append": "a\x00b"}, "Null characters"),
    ],
)
def test_it_refuses_bad_writes_and_changes_nothing(client, story, data, message):
    tree, a, b = story
    before = list(Node.objects.order_by("pk").values_list("pk", "text"))
    page = write(client, tree, b, **data)
    assert page.status_code == 422 and message in page.text and 'role="alert"' in page.text
    assert list(Node.objects.order_by("pk").values_list("pk", "text")) == before


def test_it_edits_only_segments_on_the_path(client, story, make_tree):
    tree, a, b = story
    off_path = tree.root.add_child(" elsewhere")
    other = make_tree(owner=tree.owner, prompt="Other tree")
    for target in (off_path, other.root):
        page = write(client, tree, b, edits=[{"node": target.pk, "text": " changed"}])
        assert page.status_code == 422 and "not on this path" in page.text
        assert Node.objects.get(pk=target.pk).text != " changed"


def test_it_refuses_the_whole_write_when_the_generation_is_refused(client, story):
    tree, a, b = story
    page = write(client, tree, b, append=" more", generate="1", temperature="200")
    assert page.status_code == 422 and "Nothing was saved or sent" in page.text
    assert "temperature" in page.text
    assert not Node.objects.filter(parent=b).exists()


def test_it_answers_404_for_someone_elses_tree(client, story, make_user):
    tree, a, b = story
    client.force_login(make_user())
    assert write(client, tree, b, append=" mine").status_code == 404
    assert client.post(f"/loom/{tree.pk}/write-mode/", {"mode": "sibling"}).status_code == 404
    assert not Node.objects.filter(parent=b).exists()
    assert Tree.objects.get(pk=tree.pk).write_mode == WriteMode.IN_PLACE


def test_it_refuses_an_unknown_write_mode(client, story):
    tree, a, b = story
    page = client.post(f"/loom/{tree.pk}/write-mode/", {"mode": "chaos"}, **HX)
    assert page.status_code == 422 and "Not changed" in page.text
    assert Tree.objects.get(pk=tree.pk).write_mode == WriteMode.IN_PLACE
