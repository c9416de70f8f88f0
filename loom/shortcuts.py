"""What every Loom view shares: a node of the tree or a 404, a node's address, a
form's cleaned data or the refusal to show, and the status and session key the pages
agree on. Kept below the view modules (and loom/tree_views.py), which all import it."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.urls import reverse

from core.forms import first_error
from loom.models import LoomError, Node, Tree

# Refusals render a fragment that says why; loom pages tell htmx to swap 422s
# (its default leaves 4xx responses unswapped, so the message would never show).
INVALID = 422
# Whether the reader lists archived nodes among children and siblings (per session).
SHOW_ARCHIVED = "loom_show_archived"


def owned_node(tree: Tree, node_id: int) -> Node:
    # With its writer: the reader shows the name (one join rather than a second query).
    return get_object_or_404(Node.objects.select_related("written_by"), pk=node_id, tree=tree)


def node_or_none(tree: Tree, node_id: int | None) -> Node | None:
    """The tree's node with that id, else None (gone, or no id)."""
    return None if node_id is None else Node.objects.filter(pk=node_id, tree=tree).first()


def node_url(node: Node | int, tree: Tree) -> str:
    node_id = node.pk if isinstance(node, Node) else node
    return reverse("loom:node", args=[tree.pk, node_id])


def cleaned(form_class: Any, data: Any) -> dict:
    """The form's cleaned data, or LoomError with its first error (shown to the user)."""
    form = form_class(data)
    if not form.is_valid():
        raise LoomError(first_error(form))
    return form.cleaned_data


def whole_number(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise LoomError(f"{name} must be a whole number.") from None
