"""Server-side undo and redo: every structural change logs an entry on the tree's undo
stack (Tree.log, loom/models/history.py); undoing pops the newest one and runs its
inverse from the registry below, under the tree's row lock, and pushes the inverse of
that inverse onto the redo stack, so redo is the same machinery run the other way. A
new change empties the redo stack (Tree.log).
An inverse that would delete text nothing else keeps refuses instead.

Each inverse returns (node id to show, the step that undoes it again): the second is
an (action, data) pair of this same registry, so undo and redo can go back and forth
any number of times."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from completions.models import Generation
from loom import live
from loom.models import (
    LoomError,
    Node,
    Stack,
    Tree,
    UndoEntry,
    merge_nodes,
    node_record_from_values,
    set_order,
)

Step = tuple[str, dict]
Done = tuple[int | None, Step | None]


class UndoRefused(Exception):
    """Undoing this step would delete text that nothing else keeps."""


def undo_last(tree: Tree, user=None) -> tuple[str, int | None] | None:
    """Revert the user's last logged operation (None: anyone's); returns (label, node
    id to show) or None, or raises LoomError when the step would delete text nothing
    else keeps (the step is then dropped, so it does not block earlier ones) or
    someone else's later work (the step is kept: it may be undone once theirs is)."""
    return _replay(tree, user, Stack.UNDO, Stack.REDO, "Not undone")


def redo_last(tree: Tree, user=None) -> tuple[str, int | None] | None:
    """Do the user's last undone step again (its inverse goes back onto the undo
    log); None when there is nothing to redo."""
    return _replay(tree, user, Stack.REDO, Stack.UNDO, "Not redone")


def own_steps(tree: Tree, source, user):
    """The user's steps; the owner's include those logged without a user (before
    trees were shared, or outside a request)."""
    if user is None:
        return source.all()
    mine = Q(user=user)
    if tree.owner_id == user.pk:
        mine |= Q(user__isnull=True)
    return source.filter(mine)


# Undoing these takes nodes or text away (the others set a flag or put nodes back).
REMOVING = {"add", "attach", "reattach", "restore", "edit", "split", "merge"}


def _removes(action: str, data: dict) -> bool:
    if action == "batch":
        return any(_removes(s["action"], s["data"]) for s in data.get("steps") or [])
    return action in REMOVING


def _own_nodes(data: dict) -> set[int]:
    """The nodes a step made or changed (not merely the place it happened)."""
    found = [data.get("node"), data.get("tail"), *(data.get("nodes") or [])]
    found += [r.get("id") for r in data.get("rows") or [] if isinstance(r, dict)]
    if isinstance(data.get("row"), dict):
        found.append(data["row"].get("id"))
    for step in data.get("steps") or []:
        found += _own_nodes(step["data"])
    return {i for i in found if isinstance(i, int) and not isinstance(i, bool)}


def check_others_later_work(tree: Tree, entry, user) -> None:
    """Refuse to undo a step of `user`'s when someone else has since changed one of
    the nodes it made or changed, or anything below them: undoing it would remove
    their work (or write over it)."""
    if user is None or not _removes(entry.action, entry.data):
        return
    later = (
        tree.undo_log.filter(id__gt=entry.id, user__isnull=False)
        .exclude(user=user)
        .select_related("user")
        .order_by("id")
    )
    if not later.exists():
        return
    region = set()
    for node_id in _own_nodes(entry.data):
        region.update(Node.objects.subtree_ids(node_id))
    for other in later:
        touched = region.intersection(live.node_ids(other.data))
        if touched:
            who = other.user.get_username() if other.user else "someone"
            raise LoomError(
                f"Not undone ({entry.label}): {who} has since changed "
                f"node {min(touched)} ({other.label}), which undoing it would remove or "
                "write over. Nothing was changed."
            )


def _replay(
    tree: Tree, user, source: Stack, into: Stack, refusal: str
) -> tuple[str, int | None] | None:
    """Pop the user's newest step of `source`, run its inverse and push the way back
    onto `into`."""
    with transaction.atomic():
        tree.lock()
        steps = own_steps(tree, tree.history.filter(stack=source), user)
        entry = steps.select_for_update().order_by("-id").first()
        if entry is None:
            return None
        if source == Stack.UNDO:
            check_others_later_work(tree, entry, user)
        try:
            with transaction.atomic():
                focus, back = UNDO[entry.action](tree, entry.data)
        except UndoRefused as exc:
            refused = f"{refusal} ({entry.label}): {exc}"
            entry.delete()
        else:
            entry.delete()
            if back is not None:
                # Straight onto the other stack: Tree.log would empty the redo stack. A
                # new row, not this one moved: the newest id is the next one popped.
                UndoEntry.objects.create(
                    tree=tree, stack=into, action=back[0], label=entry.label, data=back[1],
                    user_id=entry.user_id,
                )  # fmt: skip
            tree.touch(sorted({*live.node_ids(entry.data), *([focus] if focus else [])}))
            return entry.label, focus
    raise LoomError(refused)


def node_from_record(record: dict) -> Node:
    values = dict(record)
    for key in ("created_at", "visited_at"):
        if isinstance(values.get(key), str):
            values[key] = parse_datetime(values[key])
    return Node(**values)


def _rows(ids: list[int]) -> list[dict[str, Any]]:
    return [node_record_from_values(v) for v in Node.objects.filter(id__in=ids).values()]


def _order(parent_id: int | None) -> list[int]:
    return list(
        Node.objects.filter(parent_id=parent_id)
        .order_by("position", "id")
        .values_list("id", flat=True)
    )


def _undo_add(tree: Tree, data: dict) -> Done:
    # Children logged after the add are undone before it; any left here came
    # without an undo step of their own, and the delete would cascade to them.
    ids = data.get("nodes") or [data["node"]]
    if Node.objects.filter(parent_id__in=ids, tree=tree).exclude(id__in=ids).exists():
        raise UndoRefused(
            f"node {ids[0]} has children now; the step was dropped and nothing deleted."
        )
    rows = _rows(ids)
    parent = rows[0]["parent_id"] if rows else None
    order = _order(parent)
    Node.objects.filter(id__in=ids, tree=tree).delete()
    back = {"rows": rows, "parent": parent, "order": order, "focus": data.get("node", ids[-1])}
    return data.get("focus"), ("delete", back) if rows else None


def _undo_restore(tree: Tree, data: dict) -> Done:
    """Delete again the subtrees a redo (or an undone delete) put back, keeping their
    rows for the next redo."""
    roots = data["nodes"]
    ids = [i for r in roots for i in Node.objects.subtree_ids(r)]
    rows = _rows(ids)
    parent = Node.objects.filter(pk__in=roots).values_list("parent_id", flat=True).first()
    order = _order(parent)
    Node.objects.filter(id__in=roots, tree=tree).delete()
    back = {"rows": rows, "parent": parent, "order": order, "focus": data.get("focus_back")}
    return data.get("focus"), ("delete", back)


def _undo_attach(tree: Tree, data: dict) -> Done:
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
    rows = _rows(ids)
    parent = rows[0]["parent_id"] if rows else data.get("focus")
    order = _order(parent)
    Node.objects.filter(id__in=ids, tree=tree).delete()
    target = {**(generation.target or {}), "detached": True}
    alive.update(claimed_at=None, target=target)
    back = {"rows": rows, "generation": generation.pk, "parent": parent, "order": order,
            "focus": data.get("focus")}  # fmt: skip
    return data.get("focus"), ("reattach", back)


def _undo_reattach(tree: Tree, data: dict) -> Done:
    """Redo of an undone generation: its nodes back with the same ids, the generation
    claimed again — unless Recover has attached it somewhere meanwhile."""
    alive = Generation.objects.filter(pk=data["generation"]).select_for_update()
    generation = alive.first()
    if generation is None or generation.claimed_at is not None:
        raise UndoRefused("the generation has been attached again through Recover.")
    if not Node.objects.filter(pk=data["parent"], tree=tree).exists():
        raise UndoRefused("the node it was generated from is gone.")
    Node.objects.bulk_create([node_from_record(r) for r in data["rows"]])
    set_order(data["parent"], data["order"])
    target = {k: v for k, v in (generation.target or {}).items() if k != "detached"}
    alive.update(claimed_at=timezone.now(), target=target)
    back = {"nodes": [r["id"] for r in data["rows"]], "generation": generation.pk,
            "focus": data.get("focus")}  # fmt: skip
    return data.get("focus"), ("attach", back)


def _undo_edit(tree: Tree, data: dict) -> Done:
    now = Node.objects.filter(pk=data["node"], tree=tree).values("text", "logprobs").first()
    Node.objects.filter(pk=data["node"], tree=tree).update(
        text=data["text"], logprobs=data["logprobs"], version=F("version") + 1
    )
    back = {"node": data["node"], **now} if now else None
    return data["node"], ("edit", back) if back else None


def _flag(action: str, field: str):
    def undo(tree: Tree, data: dict) -> Done:
        now = Node.objects.filter(pk=data["node"], tree=tree).values_list(field, flat=True).first()
        Node.objects.filter(pk=data["node"], tree=tree).update(**{field: data["value"]})
        return data["node"], (action, {"node": data["node"], "value": now})

    return undo


def _undo_tags(tree: Tree, data: dict) -> Done:
    now = Node.objects.filter(pk=data["node"], tree=tree).values_list("tags", flat=True).first()
    Node.objects.filter(pk=data["node"], tree=tree).update(tags=data["tags"])
    return data["node"], ("tags", {"node": data["node"], "tags": now})


def _undo_split(tree: Tree, data: dict) -> Done:
    node = Node.objects.get(pk=data["node"], tree=tree)
    tail = Node.objects.filter(pk=data["tail"], tree=tree).first()
    back = None
    if tail is not None:
        back = {
            "row": node_record_from_values(
                Node.objects.filter(pk=tail.pk).values().first()  # type: ignore[arg-type]
            ),
            "parent": node.pk,
            "parent_text": node.text,
            "parent_logprobs": node.logprobs,
            "children": _order(tail.pk),
            "order": _order(node.pk),
        }
        merge_nodes(tail, node)
    Node.objects.filter(pk=node.pk).update(
        text=data["text"], logprobs=data.get("logprobs"), version=F("version") + 1
    )
    return node.pk, ("merge", back) if back else None


def _undo_merge(tree: Tree, data: dict) -> Done:
    parent = Node.objects.filter(pk=data["parent"], tree=tree).values("text", "logprobs").first()
    node = node_from_record(data["row"])
    node.save(force_insert=True)
    Node.objects.filter(pk=data["parent"], tree=tree).update(
        text=data["parent_text"], logprobs=data["parent_logprobs"], version=F("version") + 1
    )
    Node.objects.filter(id__in=data["children"], parent_id=data["parent"]).update(parent=node)
    set_order(node.pk, data["children"])
    set_order(data["parent"], data["order"])
    back = {"node": data["parent"], "tail": node.pk, "text": parent["text"] if parent else "",
            "logprobs": parent["logprobs"] if parent else None}  # fmt: skip
    return node.pk, ("split", back)


def _undo_move(tree: Tree, data: dict) -> Done:
    tree.lock()
    node = Node.objects.filter(pk=data["node"], tree=tree).first()
    back_to = Node.objects.filter(pk=data["parent"], tree=tree).first()
    if node is None or back_to is None or Node.objects.is_ancestor(node, back_to):
        raise UndoRefused("the node's old place is now under the node itself.")
    back = {"node": node.pk, "parent": node.parent_id, "order": _order(node.parent_id)}
    Node.objects.filter(pk=data["node"], tree=tree).update(parent_id=data["parent"])
    set_order(data["parent"], data["order"])
    return data["node"], ("move", back)


def _undo_delete(tree: Tree, data: dict) -> Done:
    # Foreign keys are deferred on Postgres, so row order does not matter here.
    Node.objects.bulk_create([node_from_record(r) for r in data["rows"]], batch_size=2000)
    set_order(data["parent"], data["order"])
    roots = [r["id"] for r in data["rows"] if r["parent_id"] == data["parent"]]
    focus = data["focus"]
    return focus, ("restore", {"nodes": roots, "focus": data["parent"], "focus_back": focus})


def _undo_batch(tree: Tree, data: dict) -> Done:
    """Several steps logged as one (Tree.batch): undone newest first; the way back
    is their inverses in the opposite order."""
    focus, back = None, []
    for step in reversed(data["steps"]):
        shown, inverse = UNDO[step["action"]](tree, step["data"])
        focus = shown if shown is not None else focus  # ends at the first step's node
        if inverse is not None:
            back.append({"action": inverse[0], "data": inverse[1]})
    return focus, ("batch", {"steps": back})


UNDO = {
    "add": _undo_add,
    "restore": _undo_restore,
    "attach": _undo_attach,
    "reattach": _undo_reattach,
    "edit": _undo_edit,
    "bookmark": _flag("bookmark", "bookmarked"),
    "archive": _flag("archive", "archived"),
    "rate": _flag("rate", "rating"),
    "tags": _undo_tags,
    "split": _undo_split,
    "merge": _undo_merge,
    "move": _undo_move,
    "delete": _undo_delete,
    "batch": _undo_batch,
}
