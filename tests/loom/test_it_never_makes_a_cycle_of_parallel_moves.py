"""Two moves in parallel — A under B and B under A — cannot both pass: each
structural edit takes the tree's row lock, so the second sees the first and is
refused. And should a cycle exist anyway (written behind Weft's back), every
recursive query still ends."""

import threading

import pytest
from django.db import connection, transaction

from loom.models import LoomError, Node, NodeQuerySet

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_the_second_of_two_crossing_moves(make_tree, monkeypatch):
    tree = make_tree(prompt="Root")
    a = tree.root.add_child(" A")
    b = tree.root.add_child(" B")
    # Both moves wait here after their ancestor check, so without a lock both
    # checks pass before either move is written (the race, made certain).
    checked = threading.Barrier(2, timeout=2)
    real = NodeQuerySet.is_ancestor

    def is_ancestor(self, maybe, node):
        answer = real(self, maybe, node)
        try:
            checked.wait()
        except threading.BrokenBarrierError:
            pass  # the other move is waiting for the tree's lock
        return answer

    monkeypatch.setattr(NodeQuerySet, "is_ancestor", is_ancestor)
    outcomes = {}

    def move(name, node_id, target_id):
        try:
            Node.objects.get(pk=node_id).move_to(Node.objects.get(pk=target_id))
            outcomes[name] = "moved"
        except LoomError as exc:
            outcomes[name] = str(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=move, args=("a under b", a.pk, b.pk)),
        threading.Thread(target=move, args=("b under a", b.pk, a.pk)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes.values()) == [
        "A node cannot move under itself or its own descendants.",
        "moved",
    ], outcomes
    for node in (a, b):
        assert Node.objects.path_to(node)[0].id == tree.root.pk  # both still reach the root


def test_it_ends_every_walk_over_a_cycle(make_tree, monkeypatch):
    monkeypatch.setattr("loom.sql.MAX_DEPTH", 100)  # 1,000,000 would take seconds
    tree = make_tree(prompt="Root")
    a = tree.root.add_child(" A")
    b = a.add_child(" B")
    c = b.add_child(" C")
    b.toggle_bookmark()
    Node.objects.filter(pk=a.pk).update(parent=b)  # A -> B -> A, written directly
    with transaction.atomic(), connection.cursor() as cur:
        # Without the guards these walks never end: fail instead of hanging.
        cur.execute("SET LOCAL statement_timeout = '5s'")
        path = Node.objects.path_to(c)
        assert len(path) == 100
        assert set(Node.objects.subtree_ids(a)) == {a.pk, b.pk, c.pk}
        assert Node.objects.is_ancestor(tree.root, c) is False
        assert Node.objects.bookmark_step(tree, c, "next") == b.pk
