"""Loomsidian's data.json: one flat node map per note, each note a tree.

Read twice, node by node (a node may come before its parent): first every note's
skeleton (records.Skeleton), then each node written, into its note's tree, as it is
read."""

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
from loom.models import Tree


def import_loomsidian(source: IO[bytes], owner: Any) -> list[Tree]:
    skeletons: list[Skeleton] = []

    def sketched(note: dict) -> None:
        skeleton = skeletons[-1]
        skeleton.check()
        current = note.get("current")
        skeleton.current = skeleton.find(current) if isinstance(current, str) else None
        skeleton.forget()

    _read(
        Events(source),
        lambda note: skeletons.append(Skeleton()),
        lambda uid, n: skeletons[-1].add(uid, _record(uid, n).parent),
        sketched,
    )
    if not skeletons:
        raise ImportRefused("The loomsidian file has no notes in 'state'.")
    source.seek(0)
    trees: list[Tree] = []
    writers: list[PlannedWriter] = []

    def end(note: dict) -> None:
        path = note["path"]
        parsed = Parsed(
            fmt="loomsidian",
            title=path.rsplit("/", 1)[-1].removesuffix(".md") or "Imported note",
            records=[],
            extra={"loomsidian": {"note": path, "hoisted": note.get("hoisted", [])}},
        )
        trees.append(writers[-1].finish(parsed, check=False))

    _read(
        Events(source),
        lambda note: writers.append(PlannedWriter(owner, skeletons[len(writers)])),
        lambda uid, n: writers[-1].add(_record(uid, n)),
        end,
    )
    return trees


def _read(
    events: Events,
    begin: Callable[[dict], None],
    on_node: Callable[[str, dict], None],
    end: Callable[[dict], None],
) -> None:
    """One read of the file: for each note of 'state', begin(note), each of its nodes
    to on_node as it comes, then end(note) with its current node and hoisted list
    (everything else in the file is passed by unbuilt)."""
    for key in events.keys("The file"):
        if key != "state":
            events.skip()
            continue
        for path in events.keys("'state'"):
            note: dict[str, Any] = {"path": path}
            begin(note)
            nodes = False
            for field in events.keys(f"state[{path!r}]"):
                if field == "nodes":
                    nodes = True
                    for uid in events.keys(f"state[{path!r}].nodes"):
                        on_node(uid, as_dict(events.value(), f"node {uid!r}"))
                elif field in ("current", "hoisted"):
                    note[field] = events.value()
                else:
                    events.skip()
            if not nodes:
                raise ImportRefused(f"state[{path!r}].nodes must be an object, not null.")
            end(note)
    events.end()


def _record(uid: str, n: dict) -> Rec:
    parent = n.get("parentId")
    return Rec(
        key=uid,
        parent=None if parent is None else as_key(parent, f"node {uid!r} parentId"),
        text=as_str(n.get("text", ""), f"node {uid!r} text"),
        bookmarked=bool(n.get("bookmarked")),
        source_id=uid,
        created_at=as_when(n.get("lastVisited")),
        extra={k: v for k, v in n.items() if k not in ("text", "parentId", "bookmarked")},
    )
