"""Reading a tree's shape: the path to a node, a subtree, a preorder walk, the next
bookmark — each one query (loom/sql.py), returning ids or light tuples rather than
Node objects where a tree can be 10,000 deep."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from django.db import connection, models

from loom import sql
from loom.models.choices import Author
from loom.sql import NODE_TABLE

if TYPE_CHECKING:
    from loom.models.node import Node
    from loom.models.tree import Tree


def _id(node: Node | int) -> int:
    return node if isinstance(node, int) else node.pk


class Segment(NamedTuple):
    """One step of a path, as the reading view needs it."""

    id: int
    parent_id: int | None
    text: str
    author: str
    bookmarked: bool
    version: int = 1  # what an edit of it in the document is based on

    @property
    def is_model(self) -> bool:
        return self.author == Author.MODEL


class NodeQuerySet(models.QuerySet):
    def path_to(self, node: Node | int, *, last: int | None = None) -> list[Segment]:
        """The segments from the root down to `node` (inclusive), or only the
        `last` ones nearest the node: one query that stops walking up there.

        Returns light named tuples rather than model instances: building 10,000
        Node objects costs more than the query itself."""
        node_id = _id(node)
        return [Segment(*row) for row in sql.path_rows(node_id, last)]

    def subtree_ids(self, node: Node | int) -> list[int]:
        """The node and all its descendants: one query."""
        return sql.subtree_ids(_id(node))

    def is_ancestor(self, maybe_ancestor: Node, node: Node) -> bool:
        """True if maybe_ancestor is on the path to node (or is node)."""
        return sql.is_ancestor(maybe_ancestor.pk, node.pk)

    def bookmark_step(self, tree: Tree, node: Node | int, direction: str) -> int | None:
        """The id of the next (or previous) bookmark after `node` in preorder,
        wrapping around; None when the tree has no bookmarks. One query."""
        return sql.bookmark_step(tree.pk, _id(node), direction)

    def preorder(
        self, tree: Tree, *, select: str | None = None, chunk: int = 5000
    ) -> Iterator[tuple[int, Any]]:
        """(depth, row) for every node of `tree` in depth-first preorder,
        siblings in order. A row is a dict of every column, or, given `select`
        (an SQL select list over the node table), that query's tuple.

        Memory: the id skeleton (two ints per node) plus one chunk of rows; the
        texts are never all in memory at once. Depth costs nothing: the walk
        uses an explicit stack, never Python recursion."""
        kids: dict[int | None, list[int]] = {}
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT id, parent_id FROM {NODE_TABLE} WHERE tree_id = %s "  # noqa: S608
                "ORDER BY position, id",
                [tree.pk],
            )
            while rows := cur.fetchmany(10_000):
                for node_id, parent_id in rows:
                    kids.setdefault(parent_id, []).append(node_id)
        # An explicit stack of (depth, id); children pushed reversed so the first pops first.
        stack = [(0, r) for r in reversed(kids.get(None, []))]
        batch: list[tuple[int, int]] = []
        while stack:
            depth, node_id = stack.pop()
            batch.append((depth, node_id))
            for child in reversed(kids.pop(node_id, [])):
                stack.append((depth + 1, child))
            if len(batch) >= chunk or not stack:
                ids = [i for _, i in batch]
                if select is None:
                    rows = {r["id"]: r for r in self.filter(id__in=ids).values()}
                else:
                    with connection.cursor() as cur:
                        cur.execute(
                            f"SELECT id, {select} FROM {NODE_TABLE} WHERE id = ANY(%s)",  # noqa: S608
                            [ids],
                        )
                        rows = {r[0]: r[1:] for r in cur.fetchall()}
                for d, i in batch:
                    yield d, rows[i]
                batch = []
