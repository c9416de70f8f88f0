"""The migration to one history table, from rows as they were before it: every undo
entry keeps its id (an expansion still points at its step), its user, label, data and
time, on the undo stack; every redo entry moves onto the redo stack in its order, with
its user, label, data and time. Then the migrated stacks work: redo does the newest
undone step, and undo takes it back. Migrating back restores the two tables."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from loom.models import Node, Stack, Tree, UndoEntry
from loom.undo import redo_last, undo_last

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("loom", "0007_versions")]
AT = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)


def old_rows(apps) -> dict:
    User = apps.get_model("auth", "User")
    OldTree = apps.get_model("loom", "Tree")
    OldNode = apps.get_model("loom", "Node")
    OldUndo = apps.get_model("loom", "UndoEntry")
    OldRedo = apps.get_model("loom", "RedoEntry")
    OldExpansion = apps.get_model("loom", "Expansion")
    owner = User.objects.create(username="before-one-history")
    editor = User.objects.create(username="editor-before-one-history")
    tree = OldTree.objects.create(owner=owner, title="t")
    root = OldNode.objects.create(tree=tree, parent=None, text="Root")
    child = OldNode.objects.create(tree=tree, parent=root, position=0, text=" kid")
    undo = [
        OldUndo.objects.create(tree=tree, user=None, action="batch", label="expand",
                               data={"steps": []}),
        OldUndo.objects.create(tree=tree, user=owner, action="add", label="add a node",
                               data={"node": child.pk, "focus": root.pk}),
        OldUndo.objects.create(tree=tree, user=editor, action="tags", label="tag “x”",
                               data={"node": child.pk, "tags": []}),
    ]  # fmt: skip
    # Undone steps, oldest first: redo must do the newest (the bookmark) first.
    redo = [
        OldRedo.objects.create(tree=tree, user=owner, action="archive", label="archive a node",
                               data={"node": child.pk, "value": True}),
        OldRedo.objects.create(tree=tree, user=owner, action="bookmark", label="bookmark",
                               data={"node": child.pk, "value": True}),
    ]  # fmt: skip
    for i, entry in enumerate(undo + redo):
        type(entry).objects.filter(pk=entry.pk).update(created_at=AT + dt.timedelta(minutes=i))
    expansion = OldExpansion.objects.create(
        tree=tree, root=root, depth=1, breadth=2, body={}, undo_entry=undo[0]
    )
    fields = ("user_id", "action", "label", "data", "created_at")
    return {
        "tree": tree.pk,
        "child": child.pk,
        "owner": owner.pk,
        "expansion": expansion.pk,
        "undo": [(e.pk, *OldUndo.objects.filter(pk=e.pk).values_list(*fields).get()) for e in undo],
        "redo": [OldRedo.objects.filter(pk=e.pk).values_list(*fields).get() for e in redo],
    }


FIELDS = ("user_id", "action", "label", "data", "created_at")


def test_it_keeps_every_undo_and_redo_entry_in_order():
    executor = migrate(BEFORE)
    try:
        made = old_rows(executor.loader.project_state(BEFORE).apps)
    finally:
        leaves = executor.loader.graph.leaf_nodes()
        migrate(leaves)
    tree = Tree.objects.get(pk=made["tree"])
    undo = tree.undo_log.order_by("id").values_list("id", *FIELDS)
    assert [tuple(row) for row in undo] == made["undo"]
    redo = tree.redo_log.order_by("id").values_list(*FIELDS)
    assert [tuple(row) for row in redo] == made["redo"]
    assert UndoEntry.objects.filter(tree=tree).count() == 5
    assert set(UndoEntry.objects.values_list("stack", flat=True)) == {Stack.UNDO, Stack.REDO}
    # The expansion's step is the same row, still on the undo stack.
    assert tree.expansions.get().undo_entry_id == made["undo"][0][0]

    # The migrated stacks work: the newest undone step is redone first, then undone.
    owner = tree.owner
    assert redo_last(tree, owner) == ("bookmark", made["child"])
    assert Node.objects.get(pk=made["child"]).bookmarked
    assert [e.label for e in tree.redo_log] == ["archive a node"]
    assert tree.undo_log.order_by("-id").first().label == "bookmark"
    assert undo_last(tree, owner) == ("bookmark", made["child"])
    assert not Node.objects.get(pk=made["child"]).bookmarked
    assert tree.redo_log.count() == 2


def test_it_migrates_back_to_two_tables():
    executor = migrate(BEFORE)
    try:
        made = old_rows(executor.loader.project_state(BEFORE).apps)
        migrate([("loom", "0008_one_history")])
        executor = migrate(BEFORE)
        apps = executor.loader.project_state(BEFORE).apps
        OldUndo = apps.get_model("loom", "UndoEntry")
        OldRedo = apps.get_model("loom", "RedoEntry")
        undo = OldUndo.objects.filter(tree_id=made["tree"]).order_by("id")
        redo = OldRedo.objects.filter(tree_id=made["tree"]).order_by("id")
        assert [tuple(r) for r in undo.values_list("id", *FIELDS)] == made["undo"]
        assert [tuple(r) for r in redo.values_list(*FIELDS)] == made["redo"]
    finally:
        leaves = executor.loader.graph.leaf_nodes()
        migrate(leaves)
