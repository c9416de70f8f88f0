"""Server-side undo: every structural change logs an UndoEntry (Tree.log); undoing
pops the newest one and runs its inverse from the registry below, under the tree's
row lock. An inverse that would delete text nothing else keeps refuses instead."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from completions.models import Generation
from loom.models import LoomError, Node, Tree, merge_nodes, set_order


class UndoRefused(Exception):
    """Undoing this step would delete text that nothing else keeps."""


def undo_last(tree: Tree) -> tuple[str, int | None] | None:
    """Revert the last logged operation; returns (label, node id to show) or
    None, or raises LoomError when the step would delete text nothing else
    keeps (the step is then dropped, so it does not block earlier ones)."""
    with transaction.atomic():
        tree.lock()
        entry = tree.undo_log.select_for_update().order_by("-id").first()
        if entry is None:
            return None
        try:
            with transaction.atomic():
                focus = UNDO[entry.action](tree, entry.data)
        except UndoRefused as exc:
            refused = f"Not undone ({entry.label}): {exc}"
            entry.delete()
        else:
            entry.delete()
            tree.touch()
            return entry.label, focus
    raise LoomError(refused)


def node_from_record(record: dict) -> Node:
    values = dict(record)
    for key in ("created_at", "visited_at"):
        if isinstance(values.get(key), str):
            values[key] = parse_datetime(values[key])
    return Node(**values)


def _undo_add(tree: Tree, data: dict) -> int | None:
    # Children logged after the add are undone before it; any left here came
    # without an undo step of their own, and the delete would cascade to them.
    if Node.objects.filter(parent_id=data["node"], tree=tree).exists():
        raise UndoRefused(
            f"node {data['node']} has children now; the step was dropped and nothing deleted."
        )
    Node.objects.filter(pk=data["node"], tree=tree).delete()
    return data.get("focus")


def _undo_attach(tree: Tree, data: dict) -> int | None:
    """Take a generation's nodes out again and hand it back to Recover, which
    can attach it anywhere: the text stays in its checkpoint."""
    ids = data["nodes"]
    alive = Generation.objects.filter(
        pk=data["generation"], expires_at__gt=timezone.now()
    ).select_for_update()
    generation = alive.first()
    if generation is None:
        raise UndoRefused(
            "the generation's checkpoint has expired, so its nodes are its only copy; "
            "delete them yourself if you want them gone."
        )
    if Node.objects.filter(parent_id__in=ids).exclude(id__in=ids).exists():
        raise UndoRefused("its nodes have children now; nothing was deleted.")
    Node.objects.filter(id__in=ids, tree=tree).delete()
    target = {**(generation.target or {}), "detached": True}
    alive.update(claimed_at=None, target=target)
    return data.get("focus")


def _undo_edit(tree: Tree, data: dict) -> int | None:
    Node.objects.filter(pk=data["node"], tree=tree).update(
        text=data["text"], logprobs=data["logprobs"]
    )
    return data["node"]


def _undo_bookmark(tree: Tree, data: dict) -> int | None:
    Node.objects.filter(pk=data["node"], tree=tree).update(bookmarked=data["value"])
    return data["node"]


def _undo_archive(tree: Tree, data: dict) -> int | None:
    Node.objects.filter(pk=data["node"], tree=tree).update(archived=data["value"])
    return data["node"]


def _undo_tags(tree: Tree, data: dict) -> int | None:
    Node.objects.filter(pk=data["node"], tree=tree).update(tags=data["tags"])
    return data["node"]


def _undo_split(tree: Tree, data: dict) -> int | None:
    node = Node.objects.get(pk=data["node"], tree=tree)
    tail = Node.objects.filter(pk=data["tail"], tree=tree).first()
    if tail is not None:
        merge_nodes(tail, node)
    Node.objects.filter(pk=node.pk).update(text=data["text"])
    return node.pk


def _undo_merge(tree: Tree, data: dict) -> int | None:
    node = node_from_record(data["row"])
    node.save(force_insert=True)
    Node.objects.filter(pk=data["parent"], tree=tree).update(
        text=data["parent_text"], logprobs=data["parent_logprobs"]
    )
    Node.objects.filter(id__in=data["children"], parent_id=data["parent"]).update(parent=node)
    set_order(node.pk, data["children"])
    set_order(data["parent"], data["order"])
    return node.pk


def _undo_move(tree: Tree, data: dict) -> int | None:
    tree.lock()
    node = Node.objects.filter(pk=data["node"], tree=tree).first()
    back = Node.objects.filter(pk=data["parent"], tree=tree).first()
    if node is None or back is None or Node.objects.is_ancestor(node, back):
        raise UndoRefused("the node's old place is now under the node itself.")
    Node.objects.filter(pk=data["node"], tree=tree).update(parent_id=data["parent"])
    set_order(data["parent"], data["order"])
    return data["node"]


def _undo_delete(tree: Tree, data: dict) -> int | None:
    # Foreign keys are deferred on Postgres, so row order does not matter here.
    Node.objects.bulk_create([node_from_record(r) for r in data["rows"]], batch_size=2000)
    set_order(data["parent"], data["order"])
    return data["focus"]


UNDO = {
    "add": _undo_add,
    "attach": _undo_attach,
    "edit": _undo_edit,
    "bookmark": _undo_bookmark,
    "archive": _undo_archive,
    "tags": _undo_tags,
    "split": _undo_split,
    "merge": _undo_merge,
    "move": _undo_move,
    "delete": _undo_delete,
}
