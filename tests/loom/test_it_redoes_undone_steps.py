"""Redo after undo: every kind of step undone can be done again, and undone again,
back and forth, with the tree the same each time; a new change ends the redo."""

import pytest

from completions.models import Generation
from loom import generation as gen
from loom.models import Author, Node
from loom.undo import redo_last, undo_last
from tests.loom.conftest import tree_shape

pytestmark = pytest.mark.django_db


def fresh(node):
    return Node.objects.get(pk=node.pk)


def round_trip(tree, change):
    """Apply `change`, then undo / redo / undo / redo: the shapes must alternate."""
    before = tree_shape(tree)
    change()
    after = tree_shape(tree)
    assert after != before
    for _ in range(2):
        assert undo_last(tree) is not None
        assert tree_shape(tree) == before
        assert redo_last(tree) is not None
        assert tree_shape(tree) == after
    return after


def test_it_redoes_every_kind_of_step(make_tree):
    tree = make_tree(prompt="Root.")
    root = tree.root
    a = root.add_child(" A")
    b = root.add_child(" B")
    a1 = fresh(a).add_child(" a1")

    round_trip(tree, lambda: root.add_child(" C"))
    round_trip(tree, lambda: fresh(a).edit(" A edited"))
    round_trip(tree, lambda: fresh(a).edit(" A sibling", as_sibling=True))
    round_trip(tree, lambda: fresh(b).toggle_bookmark())
    round_trip(tree, lambda: fresh(b).toggle_archive())
    round_trip(tree, lambda: fresh(b).add_tag("keep"))
    round_trip(tree, lambda: fresh(a).split(2))
    round_trip(tree, lambda: fresh(a1).merge_into_parent())
    round_trip(tree, lambda: fresh(b).move_to(fresh(a)))
    round_trip(tree, lambda: fresh(a).delete_subtree())
    undo_last(tree)
    assert Node.objects.filter(pk=b.pk).exists()  # the same ids came back


def test_it_redoes_generated_children_with_their_generation_claimed(make_tree):
    tree = make_tree(prompt="Root")
    g = Generation.objects.create(
        owner=tree.owner, kind="loom", params={"prompt": "x", "n": 2}, state="done",
        target={"tree": tree.pk, "parent": tree.root.pk},
        choices=[{"index": 0, "text": " one"}, {"index": 1, "text": " two"}],
    )  # fmt: skip
    made = gen.materialize(g)
    ids = [n.pk for n in made]
    undo_last(tree)
    g.refresh_from_db()
    assert g.claimed_at is None and g.target.get("detached")
    redo_last(tree)
    g.refresh_from_db()
    assert g.claimed_at is not None and not g.target.get("detached")
    assert [n.pk for n in tree.root.children()] == ids
    assert all(n.author == Author.MODEL for n in tree.root.children())


def test_it_does_not_redo_a_generation_recover_has_attached_meanwhile(make_tree):
    tree = make_tree(prompt="Root")
    other = tree.root.add_child(" elsewhere")
    g = Generation.objects.create(
        owner=tree.owner, kind="loom", params={"prompt": "x"}, state="done",
        target={"tree": tree.pk, "parent": tree.root.pk}, choices=[{"index": 0, "text": " one"}],
    )  # fmt: skip
    gen.materialize(g)
    undo_last(tree)
    gen.attach_to(tree.owner, g.pk, other)  # a new change: the redo is gone anyway
    assert redo_last(tree) is None
    assert [n.text for n in other.children()] == [" one"]


def test_it_ends_the_redo_with_a_new_change(client, make_tree):
    tree = make_tree(prompt="Root")
    tree.root.add_child(" A")
    undo_last(tree)
    assert tree.redo_log.count() == 1
    tree.root.add_child(" B")
    assert not tree.redo_log.exists()
    assert redo_last(tree) is None

    client.force_login(tree.owner)
    page = client.post(f"/loom/{tree.pk}/redo/", HTTP_HX_REQUEST="true")
    assert page.status_code == 200 and "Nothing to redo." in page.text
    client.post(f"/loom/{tree.pk}/undo/", HTTP_HX_REQUEST="true")
    page = client.post(f"/loom/{tree.pk}/redo/", HTTP_HX_REQUEST="true")
    assert "Redid: add a node." in page.text and 'role="alert"' not in page.text
    assert [c.text for c in tree.root.children()] == [" B"]


def test_it_redoes_only_in_ones_own_trees(client, make_tree, make_user):
    tree = make_tree(prompt="Root")
    tree.root.add_child(" A")
    undo_last(tree)
    client.force_login(make_user())
    assert client.post(f"/loom/{tree.pk}/redo/").status_code == 404
    assert tree.redo_log.count() == 1
