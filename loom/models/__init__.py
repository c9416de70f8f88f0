"""The Loom's models, one module per concern: the tree (tree.py), its nodes and their
operations (node.py), reading a tree's shape (queries.py), the undo history
(history.py), automatic expansions (expansion.py) and sharing (sharing.py). Import
them from here: `from loom.models import Node`."""

from loom.models.choices import Author, ChildOrder, NoteUnit, Rating, ShareRole, WriteMode
from loom.models.errors import LoomError, Stale
from loom.models.expansion import Expansion
from loom.models.history import UNDO_KEEP, Stack, UndoEntry
from loom.models.node import (
    TAG_MAX,
    TAGS_PER_NODE,
    Node,
    merge_nodes,
    node_record,
    node_record_from_values,
    set_order,
    split_logprobs,
)
from loom.models.queries import NodeQuerySet, Segment
from loom.models.sharing import LinkGrant, TreeShare
from loom.models.tree import MODEL_COLOURS, Tree, TreeQuerySet

__all__ = [
    "MODEL_COLOURS",
    "TAGS_PER_NODE",
    "TAG_MAX",
    "UNDO_KEEP",
    "Author",
    "ChildOrder",
    "Expansion",
    "LinkGrant",
    "LoomError",
    "Node",
    "NodeQuerySet",
    "NoteUnit",
    "Rating",
    "Segment",
    "ShareRole",
    "Stack",
    "Stale",
    "Tree",
    "TreeQuerySet",
    "TreeShare",
    "UndoEntry",
    "WriteMode",
    "merge_nodes",
    "node_record",
    "node_record_from_values",
    "set_order",
    "split_logprobs",
]
