"""Hoist: the reader shows the hoisted node as the top of the text (its ancestors
out of the text and the outline, r goes to it), the prompt stays the whole text.
Model-written children are unread until visited; n goes to the newest child."""

import re

import pytest

from loom.models import Author, Tree

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def data(page, name):
    return re.search(rf'data-{name}="([^"]*)"', page.text).group(1)


def test_it_hoists_a_subtree_and_unhoists(client, make_tree, make_user):
    tree = make_tree(prompt="Chapter one. ")
    a = tree.root.add_child("Part A. ")
    b = a.add_child("Scene B.")
    client.force_login(tree.owner)
    page = client.post(f"/loom/{tree.pk}/n/{a.pk}/hoist/", **HX)
    assert page.status_code == 200 and Tree.objects.get(pk=tree.pk).hoisted_id == a.pk
    page = client.get(f"/loom/{tree.pk}/n/{b.pk}/", **HX)
    doc = page.text.split('id="loom-doc"')[1].split("</div>")[0]
    assert "Part A. " in doc and "Chapter one." not in doc
    assert data(page, "root") == str(a.pk) and "Hoisted: the text starts at node" in page.text
    at_top = client.get(f"/loom/{tree.pk}/n/{a.pk}/", **HX)
    assert data(at_top, "parent") == ""  # the hoisted node is the top
    # Outside the hoisted subtree the whole path shows, and says so.
    other = tree.root.add_child("Part C.")
    page = client.get(f"/loom/{tree.pk}/n/{other.pk}/", **HX)
    assert "Chapter one." in page.text and "not on this path" in page.text
    client.post(f"/loom/{tree.pk}/n/{other.pk}/unhoist/", **HX)
    assert Tree.objects.get(pk=tree.pk).hoisted_id is None

    client.force_login(make_user())
    assert client.post(f"/loom/{tree.pk}/n/{a.pk}/hoist/").status_code == 404
    assert Tree.objects.get(pk=tree.pk).hoisted_id is None


def test_it_marks_new_model_children_unread_until_visited(client, make_tree):
    tree = make_tree(prompt="Root")
    old = tree.root.add_child(" old", author=Author.MODEL)
    new = tree.root.add_child(" new", author=Author.MODEL)
    mine = tree.root.add_child(" mine")
    client.force_login(tree.owner)
    page = client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/", **HX)
    assert data(page, "newest") == str(mine.pk)
    assert page.text.count('class="unread-mark"') == 2
    client.get(f"/loom/{tree.pk}/n/{old.pk}/", **HX)
    page = client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/", **HX)
    assert page.text.count('class="unread-mark"') == 1
    assert "unread" in child_class(page, new) and "unread" not in child_class(page, old)
    assert "unread" not in child_class(page, mine)  # written by hand: nothing to read


def child_class(page, node):
    return re.search(
        rf'<li class="(child [^"]*)"[^>]*>\s*<a href="[^"]*/n/{node.pk}/"', page.text
    ).group(1)
