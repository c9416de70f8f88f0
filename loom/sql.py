"""The Loom's raw SQL: the recursive walks over the adjacency list (path, subtree,
ancestry, bookmarks in preorder) and the bulk renumbering of siblings. Values are
always parameters; the only identifiers interpolated are our own table's."""

from __future__ import annotations

from typing import Any

from django.db import connection

NODE_TABLE = "loom_node"

# Every recursive walk is guarded, so a cycle (which structural edits prevent
# under the tree's row lock) can never make a query run forever: walks whose
# rows repeat in a cycle use UNION, which drops a row seen before and so ends;
# walks that carry a level stop at MAX_DEPTH (a parameter: no cost per step).
MAX_DEPTH = 1_000_000  # the most nodes an import may hold: no real path is longer

# Each recursive step looks one row up (or the children down) through a
# LATERAL … OFFSET 0 subquery: that pins the plan to an index lookup per step.
# A plain join lets the planner pick a hash join over the whole table per step
# when statistics are missing (a fresh import): 9 s instead of 30 ms on a
# 10,000-deep chain.
PATH_SQL = f"""
    WITH RECURSIVE p(id, parent_id, text, author, bookmarked, version, lvl) AS (
        SELECT id, parent_id, text, author, bookmarked, version, 0 FROM {NODE_TABLE}
        WHERE id = %s
        UNION ALL
        SELECT a.id, a.parent_id, a.text, a.author, a.bookmarked, a.version, p.lvl + 1
        FROM p, LATERAL (
            SELECT id, parent_id, text, author, bookmarked, version FROM {NODE_TABLE}
            WHERE id = p.parent_id OFFSET 0
        ) a
        WHERE p.lvl + 1 < %s
    )
    SELECT id, parent_id, text, author, bookmarked, version FROM p ORDER BY lvl DESC
"""  # noqa: S608 - identifiers are ours, values are parameters
SUBTREE_SQL = f"""
    WITH RECURSIVE s(id) AS (
        SELECT id FROM {NODE_TABLE} WHERE id = %s
        UNION
        SELECT c.id FROM s, LATERAL (
            SELECT id FROM {NODE_TABLE} WHERE parent_id = s.id OFFSET 0
        ) c
    )
    SELECT id FROM s
"""  # noqa: S608
ANCESTOR_SQL = f"""
    WITH RECURSIVE p(id, parent_id) AS (
        SELECT id, parent_id FROM {NODE_TABLE} WHERE id = %s
        UNION
        SELECT a.id, a.parent_id FROM p, LATERAL (
            SELECT id, parent_id FROM {NODE_TABLE} WHERE id = p.parent_id OFFSET 0
        ) a
    )
    SELECT EXISTS (SELECT 1 FROM p WHERE id = %s)
"""  # noqa: S608

# Bookmarks in preorder: walk up from each bookmark (and the current node) to
# the root, then give each one its path as a flat array of (position, id) pairs
# from the root down. Arrays compare element by element and a prefix sorts
# first, which is exactly preorder with siblings in (position, id) order. The
# walk costs the bookmarks' depths, not the tree's size, and array_agg builds
# each key once (appending to an array per step would be quadratic in depth).
BOOKMARK_KEYS_SQL = f"""
    WITH RECURSIVE w(origin, bm, id, parent_id, position, lvl) AS (
        (SELECT id, true, id, parent_id, position, 0 FROM {NODE_TABLE}
         WHERE tree_id = %s AND bookmarked
         UNION ALL
         SELECT id, false, id, parent_id, position, 0 FROM {NODE_TABLE}
         WHERE id = %s AND tree_id = %s AND NOT bookmarked)
        UNION ALL
        SELECT w.origin, w.bm, a.id, a.parent_id, a.position, w.lvl + 1 FROM w, LATERAL (
            SELECT id, parent_id, position FROM {NODE_TABLE} WHERE id = w.parent_id OFFSET 0
        ) a
        WHERE w.lvl < %s
    ), k AS (
        SELECT w.origin, bool_or(w.bm) AS bm, array_agg(v.x ORDER BY w.lvl DESC, v.o) AS key
        FROM w, LATERAL (VALUES (1, w.position::bigint), (2, w.id::bigint)) v(o, x)
        GROUP BY w.origin
    ), cur AS (SELECT key FROM k WHERE origin = %s)
    SELECT k.origin FROM k, cur WHERE k.bm
"""  # noqa: S608
# After the current node first (ascending), then wrap around to the first.
BOOKMARK_NEXT_SQL = BOOKMARK_KEYS_SQL + " ORDER BY k.key <= cur.key, k.key LIMIT 1"
# Before the current node first (descending), then wrap around to the last.
BOOKMARK_PREV_SQL = BOOKMARK_KEYS_SQL + " ORDER BY k.key >= cur.key, k.key DESC LIMIT 1"


def path_rows(node_id: int, last: int | None) -> list[tuple[Any, ...]]:
    """(id, parent_id, text, author, bookmarked, version) from the root down to the node, or
    only the `last` rows nearest it."""
    with connection.cursor() as cur:
        cur.execute(PATH_SQL, [node_id, min(last or MAX_DEPTH, MAX_DEPTH)])
        return cur.fetchall()


def subtree_ids(node_id: int) -> list[int]:
    with connection.cursor() as cur:
        cur.execute(SUBTREE_SQL, [node_id])
        return [row[0] for row in cur.fetchall()]


def is_ancestor(ancestor_id: int, node_id: int) -> bool:
    with connection.cursor() as cur:
        cur.execute(ANCESTOR_SQL, [node_id, ancestor_id])
        return bool(cur.fetchone()[0])


def bookmark_step(tree_id: int, node_id: int, direction: str) -> int | None:
    sql = BOOKMARK_NEXT_SQL if direction == "next" else BOOKMARK_PREV_SQL
    with connection.cursor() as cur:
        cur.execute(sql, [tree_id, node_id, tree_id, MAX_DEPTH, node_id])
        row = cur.fetchone()
    return row[0] if row else None


def renumber(order: list[int]) -> None:
    """Give the nodes `order` positions 0, 1, 2, … in one statement."""
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {NODE_TABLE} SET position = v.pos "  # noqa: S608
            "FROM unnest(%s::bigint[], %s::int[]) AS v(id, pos) WHERE {t}.id = v.id".format(
                t=NODE_TABLE
            ),
            [order, list(range(len(order)))],
        )
