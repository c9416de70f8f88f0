"""d / a step through bookmarks in preorder (siblings by position), not in the
order the bookmarks or nodes were created; one query however deep."""

import pytest

from loom.models import Node
from tests.loom.conftest import build_chain, shown_node

pytestmark = pytest.mark.django_db


def step(client, tree, node, direction):
    response = client.get(
        f"/loom/{tree.pk}/n/{node.pk}/bookmark/{direction}/", HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200, response.text
    return shown_node(response)


def test_it_steps_bookmarks_in_preorder_and_wraps(client, make_user, make_tree):
    user = make_user()
    tree = make_tree(user, prompt="Root")
    root = tree.root
    b = root.add_child(" B")  # created first, but listed second (below)
    a = root.add_child(" A")
    Node.objects.filter(pk=a.pk).update(position=0)
    Node.objects.filter(pk=b.pk).update(position=1)
    b1 = b.add_child(" b1")
    a1 = a.add_child(" a1")  # created last, but first in preorder after a
    for n in (b1, b, a1, a):  # bookmarked out of order too
        Node.objects.get(pk=n.pk).toggle_bookmark()
    # Preorder: root, a, a1, b, b1 (creation order would be b, a, b1, a1).
    order = [a.pk, a1.pk, b.pk, b1.pk]
    client.force_login(user)

    seen, at = [], root
    for _ in range(5):
        at = Node.objects.get(pk=step(client, tree, at, "next"))
        seen.append(at.pk)
    assert seen == [*order, a.pk]  # wraps to the first

    seen, at = [], root
    for _ in range(5):
        at = Node.objects.get(pk=step(client, tree, at, "prev"))
        seen.append(at.pk)
    assert seen == [b1.pk, b.pk, a1.pk, a.pk, b1.pk]  # from the root: wraps to the last

    # From an unbookmarked node in the middle: the neighbours in tree order.
    plain = a1.add_child(" plain")
    assert Node.objects.bookmark_step(tree, plain, "next") == b.pk
    assert Node.objects.bookmark_step(tree, plain, "prev") == a1.pk


def test_it_steps_through_deep_bookmarks_in_one_query(make_tree, django_assert_num_queries):
    tree = make_tree(prompt="Root")
    side = tree.root.add_child(" side")
    chain = build_chain(tree, 3000)
    deep = chain[-1]
    Node.objects.filter(pk__in=[deep.pk, side.pk, chain[10].pk]).update(bookmarked=True)
    # The chain hangs from the root after `side`: side, chain[10], deep in preorder.
    root = tree.root
    with django_assert_num_queries(1):
        assert Node.objects.bookmark_step(tree, root, "next") == side.pk
    assert Node.objects.bookmark_step(tree, side, "next") == chain[10].pk
    assert Node.objects.bookmark_step(tree, chain[10], "next") == deep.pk
    assert Node.objects.bookmark_step(tree, deep, "next") == side.pk
    assert Node.objects.bookmark_step(tree, side, "prev") == deep.pk


def test_it_says_so_when_there_are_no_bookmarks(client, make_user, make_tree):
    user = make_user()
    tree = make_tree(user)
    client.force_login(user)
    response = client.get(
        f"/loom/{tree.pk}/n/{tree.root.pk}/bookmark/next/", HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 422 and "no bookmarks" in response.text
    assert Node.objects.bookmark_step(tree, tree.root, "prev") is None
