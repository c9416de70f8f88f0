"""Tags: add and remove tags on the current node from the page; shown on the
node, escaped, undoable."""

import pytest

from loom.models import Node

pytestmark = pytest.mark.django_db


def test_it_adds_shows_and_removes_tags(client, make_user, make_tree):
    user = make_user()
    tree = make_tree(user, prompt="Root")
    node = tree.root.add_child(" c")
    client.force_login(user)
    url = f"/loom/{tree.pk}/n/{node.pk}"

    added = client.post(f"{url}/tag/", {"tag": "  <i>draft</i>  "}, HTTP_HX_REQUEST="true")
    assert added.status_code == 200
    client.post(f"{url}/tag/", {"tag": "keeper"}, HTTP_HX_REQUEST="true")
    client.post(f"{url}/tag/", {"tag": "keeper"}, HTTP_HX_REQUEST="true")  # no duplicate
    assert Node.objects.get(pk=node.pk).tags == ["<i>draft</i>", "keeper"]
    page = client.get(f"{url}/").text
    assert '<span class="tag">&lt;i&gt;draft&lt;/i&gt;' in page and "<i>draft" not in page
    assert 'name="tag" value="keeper"' in page and 'id="tag-input"' in page

    removed = client.post(f"{url}/untag/", {"tag": "<i>draft</i>"}, HTTP_HX_REQUEST="true")
    assert removed.status_code == 200 and Node.objects.get(pk=node.pk).tags == ["keeper"]
    undone = client.post(f"/loom/{tree.pk}/undo/", HTTP_HX_REQUEST="true")
    assert "Undid: remove tag" in undone.text
    assert Node.objects.get(pk=node.pk).tags == ["<i>draft</i>", "keeper"]

    empty = client.post(f"{url}/tag/", {"tag": "   "}, HTTP_HX_REQUEST="true")
    assert empty.status_code == 422 and "Write a tag" in empty.text
    long = client.post(f"{url}/tag/", {"tag": "x" * 41}, HTTP_HX_REQUEST="true")
    assert long.status_code == 422 and "at most 40" in long.text
    assert Node.objects.get(pk=node.pk).tags == ["<i>draft</i>", "keeper"]


def test_it_refuses_tags_on_another_users_node(client, make_user, make_tree):
    tree = make_tree(make_user("owner"))
    node = tree.root.add_child(" c", log=False)
    Node.objects.filter(pk=node.pk).update(tags=["mine"])
    client.force_login(make_user("intruder"))
    for action in ("tag", "untag"):
        assert (
            client.post(f"/loom/{tree.pk}/n/{node.pk}/{action}/", {"tag": "mine"}).status_code
            == 404
        )
    assert Node.objects.get(pk=node.pk).tags == ["mine"]
