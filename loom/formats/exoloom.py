"""Exoloom exports: a flat node map with children order, bookmarks and pruned nodes.

Read twice, node by node (a node may come before its parent, and the lens with the
marks after the tree): first the skeleton (records.Skeleton: parents, each parent's
order of children, the marks), then each node written as it is read."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

from loom.formats.jsonstream import Events
from loom.formats.records import (
    ImportRefused,
    Parsed,
    PlannedWriter,
    Rec,
    Skeleton,
    as_dict,
    as_key,
    as_str,
    as_when,
)
from loom.models import Author, Tree


def import_exoloom(source: IO[bytes], title: str, owner: Any) -> Tree:
    skeleton = Skeleton()

    def sketch(nid: str, n: dict) -> None:
        rec, kids = _record(nid, n, set(), set())
        skeleton.add(nid, rec.parent, kids)

    doc = _read(Events(source), sketch)
    skeleton.check()
    root = doc["tree"].get("rootNodeId")
    if root is not None and skeleton.find(root) is None:
        raise ImportRefused(f"tree.rootNodeId {root!r} is not among the nodes.")
    skeleton.forget()
    source.seek(0)
    writer = PlannedWriter(owner, skeleton)
    marked, pruned = doc["marked"], doc["pruned"]
    _read(Events(source), lambda nid, n: writer.add(_record(nid, n, marked, pruned)[0]))
    parsed = Parsed(
        fmt="exoloom",
        title=as_str(doc["tree"].get("title") or "", "tree.title"),
        fallback=title,
        records=[],
        extra={
            "exoloom": {"version": doc.get("version"), "schemaVersion": doc.get("schemaVersion")}
        },
    )
    return writer.finish(parsed, check=False)


def _read(events: Events, on_node: Callable[[str, dict], None]) -> dict[str, Any]:
    """One read of the file: each node of tree.nodes to on_node as it comes; returns
    the few other values the format uses (everything else is passed by unbuilt)."""
    doc: dict[str, Any] = {"tree": None, "marked": set(), "pruned": set()}
    nodes = False
    for key in events.keys("The file"):
        if key == "tree":
            doc["tree"] = {}
            for field in events.keys("'tree'"):
                if field == "nodes":
                    nodes = True
                    for nid in events.keys("tree.nodes"):
                        on_node(nid, as_dict(events.value(), f"node {nid!r}"))
                elif field in ("title", "rootNodeId"):
                    doc["tree"][field] = events.value()
                else:
                    events.skip()
        elif key == "lens" and events.peek()[0] == "start_map":
            for field in events.keys("'lens'"):
                if field in ("bookmarks", "prunedNodes"):
                    doc["marked" if field == "bookmarks" else "pruned"] |= _node_ids(events)
                else:
                    events.skip()
        elif key in ("version", "schemaVersion"):
            doc[key] = events.value()
        else:
            events.skip()
    events.end()
    as_dict(doc["tree"], "'tree'")
    if not nodes:
        raise ImportRefused("tree.nodes must be an object, not null.")
    return doc


def _node_ids(events: Events) -> set[str]:
    """The nodeId of each {nodeId} in a lens list (anything else in it is ignored)."""
    if events.peek()[0] != "start_array":
        events.skip()
        return set()
    events.expect("start_array", "a lens list")
    ids = set()
    for first in events:
        if first[0] == "end_array":
            break
        item = events.value(first)
        if isinstance(item, dict):
            ids.add(str(item.get("nodeId")))
    return ids


def _record(nid: str, n: dict, marked: set[str], pruned: set[str]) -> tuple[Rec, list[str]]:
    """The node's record and the ids its childrenIds lists, in order."""
    kind = n.get("authorType", "USER")
    if kind not in ("USER", "LLM"):
        raise ImportRefused(f"Node {nid!r}: authorType must be USER or LLM, not {kind!r}.")
    parent = n.get("parentId")
    kids = n.get("childrenIds") or []
    if not isinstance(kids, list):
        raise ImportRefused(f"Node {nid!r}: childrenIds must be a list.")
    rec = Rec(
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
    return rec, [str(k) for k in kids]
