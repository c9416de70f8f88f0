"""Loomsidian's data.json: one flat node map per note, each note a tree."""

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


def parse_loomsidian(doc: dict) -> list[Parsed]:
    notes = doc["state"]
    if not notes:
        raise ImportRefused("The loomsidian file has no notes in 'state'.")
    out = []
    for path, note in notes.items():
        nodes = as_dict(note.get("nodes"), f"state[{path!r}].nodes")
        check_size(len(nodes))
        records: dict[str, Rec] = {}
        for uid, n in nodes.items():
            n = as_dict(n, f"node {uid!r}")
            parent = n.get("parentId")
            records[uid] = Rec(
                key=uid,
                parent=None if parent is None else as_key(parent, f"node {uid!r} parentId"),
                text=as_str(n.get("text", ""), f"node {uid!r} text"),
                bookmarked=bool(n.get("bookmarked")),
                source_id=uid,
                created_at=as_when(n.get("lastVisited")),
                extra={k: v for k, v in n.items() if k not in ("text", "parentId", "bookmarked")},
            )
        current = note.get("current")
        out.append(
            Parsed(
                fmt="loomsidian",
                title=path.rsplit("/", 1)[-1].removesuffix(".md") or "Imported note",
                records=single_root(order_flat(records)),
                extra={"loomsidian": {"note": path, "hoisted": note.get("hoisted", [])}},
                current=current if isinstance(current, str) else None,
            )
        )
    return out
