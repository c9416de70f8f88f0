"""The whole tree at once: the outline beside the reader (loomsidian), the graph
view (exoloom, Tapestry) with its layout computed here, and the per-tree
figures the trees page lists. Every view loads the tree through loom.access.tree_for()."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from django.db import connection
from django.db.models import Count, Max
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from loom import access, sql
from loom.access import tree_for
from loom.models import Node, Tree
from loom.shortcuts import SHOW_ARCHIVED, owned_node
from loom.sql import NODE_TABLE

# The outline opens the path to the current node, this many levels above it at
# most (a 10,000-deep chain would otherwise nest 10,000 lists), and lists this
# many children of each open node; the rest are counted and load on request.
OUTLINE_LEVELS = 30
OUTLINE_CHILDREN = 50
LABEL = 60
# The first words of a segment, as the graph's boxes show them: a small tree's boxes are
# wide enough for more; a big tree's few words keep its data quick to send.
GRAPH_LABEL, GRAPH_LABEL_BIG, GRAPH_BIG = 80, 32, 2_000


@dataclass
class Item:
    """One row of the outline."""

    id: int
    label: str
    author: str
    bookmarked: bool
    archived: bool
    has_kids: bool
    level: int = 1
    rating: int | None = None
    on_path: bool = False
    current: bool = False
    children: list[Item] = field(default_factory=list)
    more: bool = False  # children past OUTLINE_CHILDREN

    @property
    def expanded(self) -> bool:
        return bool(self.children)


# The first children of each parent, by the (parent, position) index one parent
# at a time (a LATERAL … LIMIT per parent), and whether each has children by one
# index probe (LATERAL … LIMIT 1). On fresh rows a plain IN over the parents, or
# an EXISTS, planned a scan of the whole table (100 ms at 10,000 nodes, 190 ms
# at 100,000); these cost the rows shown.
CHILDREN_SQL = f"""
    SELECT c.id, c.parent_id, c.author, c.bookmarked, c.archived, left(c.text, %s),
        g.one IS NOT NULL, c.rating
    FROM unnest(%s::bigint[]) AS p(id), LATERAL (
        SELECT id, parent_id, author, bookmarked, archived, text, rating FROM {NODE_TABLE}
        WHERE parent_id = p.id AND (%s OR NOT archived OR id = ANY(%s::bigint[]))
        ORDER BY position, id LIMIT %s
    ) c
    LEFT JOIN LATERAL (
        SELECT 1 AS one FROM {NODE_TABLE} k WHERE k.parent_id = c.id LIMIT 1
    ) g ON true
"""  # noqa: S608 - identifiers are ours, values are parameters


@dataclass
class Row:
    id: int
    parent_id: int | None
    author: str
    bookmarked: bool
    archived: bool
    label: str
    has_kids: bool
    rating: int | None = None


def _children_of(parent_ids: list[int], show_archived: bool, keep: set[int]) -> list[Row]:
    """The first OUTLINE_CHILDREN (+1, to know there are more) children of each
    parent, in order, in one query; nodes in `keep` are listed even when archived."""
    with connection.cursor() as cur:
        cur.execute(
            CHILDREN_SQL,
            [LABEL, parent_ids, show_archived, list(keep), OUTLINE_CHILDREN + 1],
        )
        return [Row(*r) for r in cur.fetchall()]


def _item(n: Any, level: int) -> Item:
    return Item(
        id=n.id,
        label=n.label,
        author=n.author,
        bookmarked=n.bookmarked,
        archived=n.archived,
        has_kids=n.has_kids,
        level=level,
        rating=n.rating,
    )


def outline_context(tree: Tree, node: Node, *, show_archived: bool = False) -> dict[str, Any]:
    """The outline for the reader: the path from up to OUTLINE_LEVELS above the
    current node open down to it (and its children), every other node closed.
    Three queries, each costing the rows shown, whatever the tree's size."""
    path = sql.path_rows(node.pk, OUTLINE_LEVELS + 1)
    above = path[0][1] is not None  # the outline starts below the root
    path_ids = [row[0] for row in path]
    by_id = {row[0]: row for row in path}
    kids: dict[int | None, list[Any]] = {}
    for child in _children_of(path_ids, show_archived, set(path_ids)):
        kids.setdefault(child.parent_id, []).append(child)
    top_id, _parent, text, author, bookmarked, _version = path[0]
    top = Item(
        id=top_id,
        label=text[:LABEL],
        author=author,
        bookmarked=bookmarked,
        archived=Node.objects.filter(pk=top_id).values_list("archived", flat=True).get(),
        has_kids=top_id in kids,
        level=1,
    )
    item = top
    for i, node_id in enumerate(path_ids):
        item.on_path = True
        rows = kids.get(node_id, [])
        item.more = len(rows) > OUTLINE_CHILDREN
        item.children = [_item(r, item.level + 1) for r in rows[:OUTLINE_CHILDREN]]
        if i + 1 == len(path_ids):
            item.current = True
            break
        next_id = path_ids[i + 1]
        nxt = next((c for c in item.children if c.id == next_id), None)
        if nxt is None:  # the path's next node sorts past the listed children
            _id, _parent, text, author, bookmarked, _version = by_id[next_id]
            nxt = Item(
                id=next_id,
                label=text[:LABEL],
                author=author,
                bookmarked=bookmarked,
                archived=False,
                has_kids=i + 2 < len(path_ids) or bool(kids.get(next_id)),
                level=item.level + 1,
            )
            item.children.append(nxt)
        item = nxt
    return {
        "outline": {
            "top": top,
            "above": above,
            "top_parent": path[0][1],
            "children_url": reverse("loom:outline_children", args=[tree.pk, 0]),
        }
    }


@require_GET
def outline_children(request, tree_id: int, node_id: int):
    """The children of one outline item, opened by the user (lazily: the
    outline never holds the whole tree)."""
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    level = request.GET.get("level", "")
    level = (
        min(int(level), sql.MAX_DEPTH)
        if level.isascii() and level.isdigit() and len(level) < 8
        else 1
    )
    rows = _children_of([node.pk], request.session.get(SHOW_ARCHIVED, False), set())
    items = [_item(r, level + 1) for r in rows[:OUTLINE_CHILDREN]]
    ctx = {
        "tree": tree,
        "items": items,
        "more": len(rows) > OUTLINE_CHILDREN,
        "parent": node,
    }
    return render(request, "loom/_outline.html#outline-children", ctx)


# --- the graph ------------------------------------------------------------------------

MODEL, BOOKMARK, ARCHIVED, ON_PATH, UNREAD, RATED_UP, RATED_DOWN = 1, 2, 4, 8, 16, 32, 64
# Past this the data is tens of megabytes to send and draw; the outline and search
# still reach every node.
GRAPH_MAX_NODES = 200_000


def _too_big(count: int) -> str:
    if count <= GRAPH_MAX_NODES:
        return ""
    return (
        f"This tree has {count:,} nodes; the graph view draws up to {GRAPH_MAX_NODES:,}. "
        "Use the outline beside the reader, or search the tree."
    )


def graph_nodes(tree: Tree, count: int | None = None) -> dict[str, Any]:
    """The whole tree for the graph page, in one ordered query and one pass: parallel
    arrays (not one object per node, so 10,000 nodes stay small to send) of ids, parent
    indexes (children in their order), flags (model-written, bookmark, archived, on the
    current path, unread, rated), model colours and the first words of each segment.
    The page lays it out itself (static/weft/loomlayout.js), for the screen it has."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT id, parent_id, author = 'model', bookmarked, archived, left(text, %s), "  # noqa: S608
            "rating, visited_at IS NULL, COALESCE(NULLIF(params ->> 'model', ''), checkpoint) "
            f"FROM {NODE_TABLE} WHERE tree_id = %s ORDER BY position, id",
            [GRAPH_LABEL if (count or 0) <= GRAPH_BIG else GRAPH_LABEL_BIG, tree.pk],
        )
        rows = cur.fetchall()
    index = {row[0]: i for i, row in enumerate(rows)}
    colours = tree.colours_for(sorted({r[8] for r in rows if r[2] and r[8]}))
    flags = [
        (MODEL if r[2] else 0)
        | (BOOKMARK if r[3] else 0)
        | (ARCHIVED if r[4] else 0)
        | (UNREAD if r[2] and r[7] else 0)
        | (RATED_UP if r[6] == 1 else RATED_DOWN if r[6] == -1 else 0)
        for r in rows
    ]
    roots = [i for i, r in enumerate(rows) if r[1] is None]
    current = index.get(tree.current_id, roots[0] if roots else -1)
    at = current
    while at >= 0:  # the current path, up the parent links
        flags[at] |= ON_PATH
        parent = rows[at][1]
        at = index[parent] if parent is not None else -1
    return {
        "ids": [r[0] for r in rows],
        "parent": [index[r[1]] if r[1] is not None else -1 for r in rows],
        "flags": flags,
        "colour": [colours.get(r[8], -1) if r[2] else -1 for r in rows],
        "label": [" ".join(r[5].split()) for r in rows],
        "models": sorted(colours.items(), key=lambda kv: kv[1]),
        "current": current,
    }


@require_GET
def graph(request, tree_id: int):
    tree = tree_for(request, tree_id, "view")
    count = tree.nodes.count()
    ctx = {
        "tree": tree,
        "data_url": reverse("loom:graph_data", args=[tree.pk]),
        "node_url": reverse("loom:node", args=[tree.pk, 0]),
        "count": count,
        "too_big": _too_big(count),
    }
    return render(request, "loom/graph.html", ctx)


@require_GET
def graph_data(request, tree_id: int):
    tree = tree_for(request, tree_id, "view")
    count = tree.nodes.count()
    if too_big := _too_big(count):
        return HttpResponse(
            orjson.dumps({"error": too_big}), status=422, content_type="application/json"
        )
    # orjson: 10,000 nodes encode in a few milliseconds.
    data = graph_nodes(tree, count)
    response = HttpResponse(orjson.dumps(data), content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


# --- the trees page's figures ------------------------------------------------------------

# The depth of each tree needs a walk down from its root: index lookups per
# node, ~35 ms per 10,000 nodes (1.2 s for 200,000). The trees page shows the
# cheap figures at once and asks for the depths in a second request, so a big
# import never slows the list itself.
TREE_DEPTHS_SQL = f"""
    WITH RECURSIVE w(tree_id, id, lvl) AS (
        SELECT tree_id, id, 0 FROM {NODE_TABLE}
        WHERE parent_id IS NULL AND tree_id = ANY(%s)
        UNION ALL
        SELECT w.tree_id, c.id, w.lvl + 1 FROM w, LATERAL (
            SELECT id FROM {NODE_TABLE} WHERE parent_id = w.id OFFSET 0
        ) c
        WHERE w.lvl < %s
    )
    SELECT tree_id, max(lvl) FROM w GROUP BY tree_id
"""  # noqa: S608


@dataclass
class TreeStats:
    nodes: int = 0
    last_visited: Any = None


def tree_stats(tree_ids: list[int]) -> dict[int, TreeStats]:
    """Node count and last visit (the reader stamps each node it opens) of
    each tree: one aggregate over the trees' nodes."""
    rows = (
        Node.objects.filter(tree_id__in=tree_ids)
        .values("tree_id")
        .annotate(n=Count("id"), last=Max("visited_at"))
        .order_by()
    )
    return {r["tree_id"]: TreeStats(r["n"], r["last"]) for r in rows}


def tree_depths(tree_ids: list[int]) -> dict[int, int]:
    if not tree_ids:
        return {}
    with connection.cursor() as cur:
        cur.execute(TREE_DEPTHS_SQL, [tree_ids, sql.MAX_DEPTH])
        return dict(cur.fetchall())


@require_GET
def depths(request):
    """The depth of each tree the user sees (theirs and shared), swapped into the trees page."""
    trees = list(access.visible_trees(request.user).values_list("id", flat=True))
    ctx = {"depths": sorted(tree_depths(trees).items())}
    return render(request, "loom/trees.html#depths", ctx)
