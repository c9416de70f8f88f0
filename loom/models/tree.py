"""A tree of continuations: its settings, its lens (current and hoisted node), the
structural lock, the one place its changes are announced (`touch`) and its copy.
The nodes are loom/models/node.py's, the undo history loom/models/history.py's."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone

from loom import live
from loom.models import history
from loom.models.choices import ChildOrder, NoteUnit, WriteMode
from loom.models.errors import LoomError
from loom.models.history import Stack, UndoEntry
from loom.sql import NODE_TABLE

if TYPE_CHECKING:
    from loom.models.node import Node

# Distinct model colours (loom.css .mc0 … .mc7); the ninth model reuses the first.
MODEL_COLOURS = 8


class TreeQuerySet(models.QuerySet["Tree"]):
    def for_user(self, user) -> TreeQuerySet:
        return self.filter(owner=user)

    @transaction.atomic
    def create_from_prompt(self, owner, prompt: str, *, title: str = "", settings=None) -> Tree:
        title = title.strip() or _title_from(prompt)
        tree = self.create(owner=owner, title=title, settings=settings or {})
        root = tree.nodes.create(parent=None, position=0, text=prompt, written_by=owner)
        tree.current = root
        tree.save(update_fields=["current"])
        return tree


def _title_from(text: str) -> str:
    words = " ".join(text.split())
    return (words[:60] + "…") if len(words) > 60 else (words or "Untitled tree")


class Tree(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="loom_trees"
    )
    title = models.CharField(max_length=200)
    # Defaults for new generations (any field of the door's CompletionParams);
    # validated by the door when a generation starts, not here.
    settings = models.JSONField(default=dict, blank=True)
    # Top-level keys of an imported file that Weft does not use (pyloom's
    # chapters, preferences, …), written back on export.
    extra = models.JSONField(default=dict, blank=True)
    current = models.ForeignKey(
        "Node", null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="+"
    )
    # The reader's top when set (loomsidian's hoist): the path shows from here down.
    hoisted = models.ForeignKey(
        "Node", null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="+"
    )
    write_mode = models.CharField(
        max_length=10, choices=WriteMode.choices, default=WriteMode.IN_PLACE
    )
    # {model label: colour index}, assigned once per tree so a model keeps its colour.
    model_colours = models.JSONField(default=dict, blank=True)
    # How the reader lists children, and whether thumbs-down children are left out.
    child_order = models.CharField(
        max_length=10, choices=ChildOrder.choices, default=ChildOrder.POSITION
    )
    hide_down = models.BooleanField(default=False)
    # The read-only link's secret (loom/access.py): null while the link is off. Kept as
    # it is, not hashed, so the owner can copy the link again; turning it off and on
    # draws a new one, so an old link never works again.
    link_token = models.CharField(max_length=64, null=True, blank=True, unique=True)
    # Memory: text put before every generation's prompt; the author's note: text put
    # `note_depth` newlines (or tokens) before the end of the path (loom/context.py).
    memory = models.TextField(blank=True)
    note = models.TextField(blank=True)
    note_depth = models.PositiveIntegerField(default=3)
    note_unit = models.CharField(max_length=8, choices=NoteUnit.choices, default=NoteUnit.NEWLINES)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TreeQuerySet.as_manager()
    # The requester's role, set on the tree loom.access.tree_for() hands a view.
    role: str

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title

    @property
    def root(self) -> Node:
        return self.nodes.get(parent__isnull=True)

    def node_count(self) -> int:
        return self.nodes.count()

    def lock(self) -> None:
        """Serialise structural edits of this tree (SELECT … FOR UPDATE on its
        row, to the end of the transaction): two moves checked in parallel
        could otherwise each pass the ancestor check and make a cycle."""
        Tree.objects.select_for_update().filter(pk=self.pk).values_list("pk", flat=True).first()

    def touch(self, ids: list[int] | tuple[int, ...] = (), event: str = "changed") -> None:
        """Every change of the tree's nodes ends here (Tree.log, undo, a generation's
        nodes arriving): the tree's open pages hear of it once it commits."""
        now = timezone.now()
        Tree.objects.filter(pk=self.pk).update(updated_at=now)
        # The stamp names this state of the tree: the pages' re-read parts are cached by it.
        live.publish(self.pk, event, ids, stamp=now.timestamp())

    @transaction.atomic
    def duplicate(self, *, title: str | None = None, owner: Any = None) -> Tree:
        """Copy every node in one INSERT … SELECT: no Python objects per node. The copy
        is `owner`'s (an editor's copy of a shared tree), else this tree's owner's."""
        copy = Tree.objects.create(
            owner=owner or self.owner,
            title=title or f"{self.title} (copy)",
            settings=self.settings,
            extra=self.extra,
            memory=self.memory,
            note=self.note,
            note_depth=self.note_depth,
            note_unit=self.note_unit,
            child_order=self.child_order,
            hide_down=self.hide_down,
        )
        fields = self.nodes.model._meta.concrete_fields
        columns = [str(f.column) for f in fields if f.column not in ("id", "tree_id", "parent_id")]
        cols = ", ".join(columns)
        src = ", ".join(f"n.{c}" for c in columns)
        with connection.cursor() as cur:
            # A CTE referenced twice is materialized once, so each old id gets exactly one new id.
            cur.execute(
                f"""
                WITH m AS MATERIALIZED (
                    SELECT id AS old, nextval(pg_get_serial_sequence('{NODE_TABLE}', 'id')) AS new
                    FROM {NODE_TABLE} WHERE tree_id = %s
                )
                INSERT INTO {NODE_TABLE} (id, tree_id, parent_id, {cols})
                SELECT m.new, %s, pm.new, {src}
                FROM {NODE_TABLE} n JOIN m ON m.old = n.id LEFT JOIN m pm ON pm.old = n.parent_id
                """,  # noqa: S608 - identifiers are ours, values are parameters
                [self.pk, copy.pk],
            )
        root = copy.root
        copy.current = root
        copy.save(update_fields=["current"])
        return copy

    # --- undo (loom/models/history.py) ------------------------------------------------

    @property
    def undo_log(self) -> models.QuerySet[UndoEntry]:
        return self.history.filter(stack=Stack.UNDO)

    @property
    def redo_log(self) -> models.QuerySet[UndoEntry]:
        return self.history.filter(stack=Stack.REDO)

    def log(self, action: str, label: str, data: dict) -> None:
        """Every change of the tree's structure logs its inverse here (one undo step)."""
        history.record(self, action, label, data)

    def batch(self, label: str) -> AbstractContextManager[None]:
        """Every step logged inside is one undo step, undone in reverse order."""
        return history.batch(self, label)

    # --- view state ------------------------------------------------------------------

    def colours_for(self, labels: list[str]) -> dict[str, int]:
        """The colour index of each model label, giving new labels the next indices
        (kept on the tree, so a model's colour never changes)."""
        wanted = [x for x in dict.fromkeys(labels) if x]
        if any(x not in (self.model_colours or {}) for x in wanted):
            with transaction.atomic():
                row = Tree.objects.select_for_update().only("model_colours").get(pk=self.pk)
                colours = dict(row.model_colours or {})
                for x in wanted:
                    colours.setdefault(x, len(colours) % MODEL_COLOURS)
                Tree.objects.filter(pk=self.pk).update(model_colours=colours)
                self.model_colours = colours
        return {x: self.model_colours[x] for x in wanted}

    def hoist(self, node: Node | None) -> None:
        if node is not None and node.tree_id != self.pk:
            raise LoomError("Only a node of this tree can be hoisted.")
        self.hoisted = node
        Tree.objects.filter(pk=self.pk).update(hoisted=node)
