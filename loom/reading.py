"""What the reading view shows for one node: the path, the neighbourhood and
every model-written segment's tokens (core/tokens.py). Kept apart from the views so the benchmark can
time exactly what a page open costs."""

from __future__ import annotations

import html
from typing import Any

from django.db.models import Q
from django.db.models.functions import Left
from django.urls import reverse
from django.utils.safestring import SafeString

from core.tokens import LEGEND, chips_for, chips_html
from loom.formats import exporters
from loom.generation import PARAM_FIELDS, effective_settings
from loom.models import Node, Tree

PREVIEW = 200
OUTLINE_ANCESTORS = 12
NEIGHBOURS = 200  # children/siblings listed; the rest are counted
# Segments of the path shown when a node opens; the earlier text loads on request.
# Keeps opening a node O(window) however deep it is (bench/loom_tree.py).
PATH_WINDOW = 1000


def _light(qs):
    return qs.annotate(preview=Left("text", PREVIEW)).only(
        "id", "parent_id", "author", "bookmarked", "archived", "visited_at", "position"
    )


def reader_context(
    tree: Tree, node: Node, *, children_only: bool = False, show_archived: bool = False
) -> dict[str, Any]:
    kids = node.children() if show_archived else node.children().filter(archived=False)
    children = list(_light(kids)[: NEIGHBOURS + 1])
    ctx: dict[str, Any] = {
        "tree": tree,
        "node": node,
        "children": children[:NEIGHBOURS],
        "more_children": len(children) > NEIGHBOURS,
        "show_archived": show_archived,
    }
    if children_only:
        return ctx
    segments = Node.objects.path_to(node, last=PATH_WINDOW)
    truncated = segments[0].parent_id is not None
    root_id = (
        Node.objects.filter(tree=tree, parent__isnull=True).values_list("id", flat=True).first()
        if truncated
        else segments[0].id
    )
    sibs = node.siblings()
    if not show_archived:
        sibs = sibs.filter(Q(archived=False) | Q(pk=node.pk))  # the current node stays listed
    siblings = list(_light(sibs)[: NEIGHBOURS + 1]) if node.parent_id else [node]
    ids = [s.id for s in siblings]
    at = ids.index(node.pk) if node.pk in ids else -1
    visited = [c for c in children if c.visited_at]
    last_child = max(visited, key=lambda c: c.visited_at) if visited else None
    ctx.update(
        {
            **path_context(segments, tree.pk),
            "truncated": truncated,
            "depth": f"{len(segments)}+" if truncated else len(segments) - 1,  # at least
            "ancestors": segments[-OUTLINE_ANCESTORS - 1 : -1],
            "hidden_ancestors": max(0, len(segments) - 1 - OUTLINE_ANCESTORS),
            "siblings": siblings[:NEIGHBOURS],
            "nav": {
                "parent": node.parent_id or "",
                "child": (last_child or (children[0] if children else None)).pk if children else "",
                "prev": ids[at - 1] if at > 0 else "",
                "next": ids[at + 1] if 0 <= at < len(ids) - 1 else "",
                "root": root_id,
            },
            "archived_count": archived_count(node),
            "token_legend": LEGEND,
            "last_undo": tree.undo_log.order_by("-id").values_list("label", flat=True).first(),
            "settings": (settings := effective_settings(tree)),
            "param_fields": [(f, settings.get(f, "")) for f in PARAM_FIELDS],
            "formats": exporters.FORMATS,
        }
    )
    return ctx


def archived_count(node: Node) -> int:
    """Archived children and siblings of `node` (itself excepted): one query."""
    near = Q(parent_id=node.pk)
    if node.parent_id is not None:
        near |= Q(parent_id=node.parent_id)
    return Node.objects.filter(near, archived=True).exclude(pk=node.pk).count()


def path_context(segments, tree_id: int) -> dict[str, Any]:
    """The path as spans; every model-written segment with logprobs as token chips."""
    model_ids = [s.id for s in segments if s.author == "model"]
    logprobs = (
        dict(
            Node.objects.filter(pk__in=model_ids, logprobs__isnull=False).values_list(
                "id", "logprobs"
            )
        )
        if model_ids
        else {}
    )
    return {
        "current_segment": segments[-1],
        "path_before": path_html(segments[:-1], logprobs, tree_id),
        "current_html": path_html(segments[-1:], logprobs, tree_id, current=True),
    }


def path_html(
    segments, logprobs: dict[int, Any], tree_id: int, *, current: bool = False
) -> SafeString:
    """Segments as spans. Built here rather than in a template loop, which costs
    ~60 µs a segment (600 ms for a 10,000-deep path). Every text goes through
    html.escape (here or in core.tokens.chip_html); only the spans around it are ours."""
    parts = []
    for s in segments:
        cls = "seg model" if s.author == "model" else "seg human"
        if current:
            cls += " current"
        if s.bookmarked:
            cls += " bm"
        chips = chips_for(s.text, logprobs.get(s.id)) if s.author == "model" else None
        attrs = f'class="{cls}" data-id="{int(s.id)}"'
        if current:
            attrs += ' id="current-seg"'
        if chips is None:
            parts.append(f"<span {attrs}>{html.escape(s.text)}</span>")
            continue
        # A click on an alternative makes a sibling of that segment's node.
        branch = reverse("loom:action", args=[tree_id, s.id, "alternative"])
        parts.append(
            f'<span {attrs} data-branch="loom" data-branch-url="{html.escape(branch)}">'
            f"{chips_html(chips)}</span>"
        )
    return SafeString("".join(parts))
