"""A tree's undo history: one table, two stacks. Every structural change writes an
entry on the undo stack (`record`, through Tree.log), so undo is server-side and
survives a reload; undoing moves the step's inverse onto the redo stack and redoing
moves it back (loom/undo.py runs the inverses). A new change empties the redo stack,
as in every editor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

from loom import live

if TYPE_CHECKING:
    from loom.models.tree import Tree

UNDO_KEEP = 50
# Undo steps logged inside batch(): {tree id: [(action, data), …]}.
_BATCH: ContextVar[dict[int, list[tuple[str, dict]]] | None] = ContextVar(
    "loom_batch", default=None
)


class Stack(models.TextChoices):
    UNDO = "undo", "undo"  # done steps, newest undone first
    REDO = "redo", "redo"  # undone steps, newest redone first


class UndoEntry(models.Model):
    """One step of the history: on the undo stack a change that can be undone, on the
    redo stack an undone one that can be done again. `data` is what its inverse in
    loom/undo.py needs; the newest entry of a stack (highest id) is the next one."""

    tree = models.ForeignKey("loom.Tree", on_delete=models.DB_CASCADE, related_name="history")
    stack = models.CharField(max_length=4, choices=Stack.choices, default=Stack.UNDO)
    # Who made the step: undo and redo act on the user's own steps (null: before
    # shared trees, or outside a request; the owner's).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.DB_SET_NULL,
        related_name="+", db_index=False,
    )  # fmt: skip
    action = models.CharField(max_length=20)
    label = models.CharField(max_length=100)
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["tree", "stack", "-id"], name="loom_history_latest")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(stack__in=Stack.values), name="loom_history_stack"
            )
        ]

    def __str__(self) -> str:
        return self.label


def record(tree: Tree, action: str, label: str, data: dict) -> None:
    """Log a step on the undo stack (or into the batch being built), keep the newest
    UNDO_KEEP, empty the redo stack, and tell the tree's pages."""
    batch = _BATCH.get()
    if batch is not None and tree.pk in batch:
        batch[tree.pk].append((action, data))
        return
    who = live.origin()
    UndoEntry.objects.create(
        tree=tree, action=action, label=label, data=data, user_id=who and who.user_id
    )
    keep = list(tree.undo_log.order_by("-id").values_list("id", flat=True)[:UNDO_KEEP])
    if len(keep) == UNDO_KEEP:
        tree.undo_log.filter(id__lt=keep[-1]).delete()
    # A new change ends what could be redone (as in every editor).
    tree.redo_log.delete()
    tree.touch(live.node_ids(data), event=action)


@contextmanager
def batch(tree: Tree, label: str) -> Iterator[None]:
    """Log every step made inside as one undo step ("batch"), undone in reverse
    order. Use inside a transaction: a step that fails leaves nothing logged."""
    outer = _BATCH.get()
    steps: list[tuple[str, dict]] = []
    token = _BATCH.set({**(outer or {}), tree.pk: steps})
    try:
        yield
    finally:
        _BATCH.reset(token)
    if len(steps) == 1:
        record(tree, steps[0][0], label, steps[0][1])
    elif steps:
        record(tree, "batch", label, {"steps": [{"action": a, "data": d} for a, d in steps]})
