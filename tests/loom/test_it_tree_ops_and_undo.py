import pytest

from loom.models import UNDO_KEEP, LoomError, Node, Tree
from loom.undo import undo_last

pytestmark = pytest.mark.django_db


def texts(node):
    return [s.text for s in Node.objects.path_to(node)]


def kids(node):
    return [c.text for c in node.children()]


def test_it_applies_each_operation_and_undoes_it(make_tree):
    tree = make_tree(prompt="Root.")
    root = tree.root
    a = root.add_child(" A")
    b = root.add_child(" B")
    a1 = a.add_child(" a1")
    assert kids(root) == [" A", " B"] and texts(a1) == ["Root.", " A", " a1"]

    # edit in place, then undo
    a.edit(" A edited")
    assert Node.objects.get(pk=a.pk).text == " A edited"
    assert undo_last(tree)[1] == a.pk
    assert Node.objects.get(pk=a.pk).text == " A"

    # edit as a new sibling: lands right after the node
    sib = Node.objects.get(pk=a.pk).edit(" A2", as_sibling=True)
    assert kids(root) == [" A", " A2", " B"] and sib.parent_id == root.pk
    undo_last(tree)
    assert kids(root) == [" A", " B"]

    # split: head stays, the tail adopts the children
    tail = Node.objects.get(pk=a.pk).split(1)
    assert Node.objects.get(pk=a.pk).text == " " and tail.text == "A"
    assert texts(Node.objects.get(pk=a1.pk)) == ["Root.", " ", "A", " a1"]
    undo_last(tree)
    assert texts(Node.objects.get(pk=a1.pk)) == ["Root.", " A", " a1"]
    assert not Node.objects.filter(pk=tail.pk).exists()

    # merge into parent: children take the node's place among the parent's children
    merged = Node.objects.get(pk=a.pk).merge_into_parent()
    assert merged.pk == root.pk and Node.objects.get(pk=root.pk).text == "Root. A"
    assert kids(root) == [" a1", " B"]
    undo_last(tree)
    assert Node.objects.get(pk=root.pk).text == "Root." and kids(root) == [" A", " B"]
    assert texts(Node.objects.get(pk=a1.pk)) == ["Root.", " A", " a1"]

    # move a subtree, refuse moving under its own descendant, undo
    Node.objects.get(pk=a.pk).move_to(Node.objects.get(pk=b.pk))
    assert texts(Node.objects.get(pk=a1.pk)) == ["Root.", " B", " A", " a1"]
    with pytest.raises(LoomError):
        Node.objects.get(pk=b.pk).move_to(Node.objects.get(pk=a1.pk))
    undo_last(tree)
    assert kids(root) == [" A", " B"] and texts(Node.objects.get(pk=a1.pk)) == [
        "Root.",
        " A",
        " a1",
    ]

    # delete a subtree and bring it back with the same ids and metadata
    Node.objects.filter(pk=a1.pk).update(bookmarked=True, tags=["keep"])
    assert Node.objects.get(pk=a.pk).delete_subtree() == 2
    assert not Node.objects.filter(pk__in=[a.pk, a1.pk]).exists()
    undo_last(tree)
    restored = Node.objects.get(pk=a1.pk)
    assert restored.parent_id == a.pk and restored.bookmarked and restored.tags == ["keep"]
    assert kids(root) == [" A", " B"]

    # bookmark
    assert Node.objects.get(pk=b.pk).toggle_bookmark() is True
    undo_last(tree)
    assert Node.objects.get(pk=b.pk).bookmarked is False

    # hand-written child
    Node.objects.get(pk=b.pk).add_child(" b1")
    undo_last(tree)
    assert kids(Node.objects.get(pk=b.pk)) == []
    assert undo_last(tree) is not None  # the adds of a, b, a1 are logged too


def test_it_keeps_at_least_20_undo_steps_across_reloads(make_tree):
    tree = make_tree(prompt="x")
    node = tree.root.add_child("0", log=False)
    for i in range(1, 31):
        node.edit(str(i))
    assert tree.undo_log.count() == 30 <= UNDO_KEEP
    fresh = Tree.objects.get(pk=tree.pk)  # as after a reload: nothing kept in memory
    for expected in range(29, 9, -1):
        undo_last(fresh)
        assert Node.objects.get(pk=node.pk).text == str(expected)


def test_it_refuses_operations_that_make_no_sense(make_tree):
    tree = make_tree(prompt="abc")
    root = tree.root
    with pytest.raises(LoomError):
        root.delete_subtree()
    with pytest.raises(LoomError):
        root.merge_into_parent()
    with pytest.raises(LoomError):
        root.split(0)
    with pytest.raises(LoomError):
        root.split(3)
    other = make_tree(prompt="other")
    child = root.add_child("c")
    with pytest.raises(LoomError):
        child.move_to(other.root)
