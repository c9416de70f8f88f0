"""What an operation on a tree refuses, shown to the user as it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loom.models.node import Node


class LoomError(Exception):
    """An operation that makes no sense for this node (shown to the user)."""


class Stale(LoomError):
    """The node changed since the version an edit, split or merge was based on: not
    applied. Carries the node as it is now, so the writer sees both texts."""

    def __init__(self, node: Node, mine: str = "") -> None:
        self.node = node
        self.mine = mine
        super().__init__(
            f"Node {node.pk} was changed meanwhile (it is at version {node.version} now): "
            "your change was not applied over it."
        )
