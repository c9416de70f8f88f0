"""An automatic expansion of a node (the model; loom/expansion.py runs it)."""

from __future__ import annotations

from django.db import models

from loom.models.history import UndoEntry
from loom.models.node import Node
from loom.models.tree import Tree


class Expansion(models.Model):
    """An automatic expansion of a node: `depth` levels of `breadth` children each,
    optionally only the best `keep` of each node's children taken further (by mean
    logprob). Its generations are bulk work (loom/expansion.py); everything it adds is
    one undo step (`undo_entry`, whose steps grow as the nodes arrive)."""

    class State(models.TextChoices):
        RUNNING = "running", "running"
        DONE = "done", "done"
        CANCELLED = "cancelled", "cancelled"
        STOPPED = "stopped", "stopped"  # a later level could not start (budget, backend)

    tree = models.ForeignKey(Tree, on_delete=models.DB_CASCADE, related_name="expansions")
    root = models.ForeignKey(
        Node, null=True, on_delete=models.DB_SET_NULL, related_name="+", db_index=False
    )
    depth = models.PositiveSmallIntegerField()
    breadth = models.PositiveSmallIntegerField()
    keep = models.PositiveSmallIntegerField(null=True, blank=True)
    # The door's request without its prompt (n = breadth), and the memory and note it
    # was started with (every level uses the same).
    body = models.JSONField()
    context = models.JSONField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.RUNNING)
    worst_case_tokens = models.BigIntegerField(default=0)
    started = models.PositiveIntegerField(default=0)  # generations sent
    finished = models.PositiveIntegerField(default=0)  # generations ended
    nodes = models.PositiveIntegerField(default=0)  # children made
    message = models.TextField(blank=True)
    undo_entry = models.ForeignKey(
        UndoEntry, null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tree", "state"], name="loom_expansion_tree_state")]

    def __str__(self) -> str:
        return f"expansion {self.pk}"

    @property
    def is_running(self) -> bool:
        return self.state == self.State.RUNNING
