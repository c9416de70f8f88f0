"""Exoloom exports: a flat node map with children order, bookmarks and pruned nodes."""

from __future__ import annotations

from loom.formats.records import (
    ImportRefused,
    Parsed,
    Rec,
    as_dict,
    as_key,
    as_str,
    as_when,
    check_size,
    order_flat,
    single_root,
)
from loom.models import Author


def parse_exoloom(doc: dict, title: str) -> Parsed:
    tree = as_dict(doc.get("tree"), "'tree'")
    nodes = as_dict(tree.get("nodes"), "tree.nodes")
    check_size(len(nodes))
    lens = doc.get("lens") if isinstance(doc.get("lens"), dict) else {}
    marked = {str(b.get("nodeId")) for b in lens.get("bookmarks") or [] if isinstance(b, dict)}
    pruned = {str(b.get("nodeId")) for b in lens.get("prunedNodes") or [] if isinstance(b, dict)}
    records: dict[str, Rec] = {}
    order: dict[str, list[str]] = {}
    for nid, n in nodes.items():
        n = as_dict(n, f"node {nid!r}")
        kind = n.get("authorType", "USER")
        if kind not in ("USER", "LLM"):
            raise ImportRefused(f"Node {nid!r}: authorType must be USER or LLM, not {kind!r}.")
        parent = n.get("parentId")
        kids = n.get("childrenIds") or []
        if not isinstance(kids, list):
            raise ImportRefused(f"Node {nid!r}: childrenIds must be a list.")
        order[nid] = [str(k) for k in kids]
        records[nid] = Rec(
            key=nid,
            parent=None if parent is None else as_key(parent, f"node {nid!r} parentId"),
            text=as_str(n.get("content", ""), f"node {nid!r} content"),
            author=Author.MODEL if kind == "LLM" else Author.HUMAN,
            bookmarked=nid in marked,
            archived=nid in pruned,
            source_id=nid,
            created_at=as_when(n.get("createdAt")),
            fields={"checkpoint": str(n.get("authorName") or "")[:300]} if kind == "LLM" else {},
            extra={"authorName": n.get("authorName")} if n.get("authorName") else {},
        )
    root = tree.get("rootNodeId")
    if root is not None and str(root) not in records:
        raise ImportRefused(f"tree.rootNodeId {root!r} is not among the nodes.")
    return Parsed(
        fmt="exoloom",
        title=as_str(tree.get("title") or "", "tree.title"),
        fallback=title,
        records=single_root(order_flat(records, order)),
        extra={
            "exoloom": {"version": doc.get("version"), "schemaVersion": doc.get("schemaVersion")}
        },
    )
