"""pyloom's nested JSON tree, read event by event with an explicit stack (depth
costs one frame, never recursion)."""

from __future__ import annotations

from typing import Any

from loom.formats.jsonstream import Events
from loom.formats.records import (
    ImportRefused,
    Parsed,
    Rec,
    TreeWriter,
    as_key,
    as_str,
    as_when,
    check_size,
)
from loom.models import Author

_PYLOOM_OWN = {"id", "text", "children", "parent_id", "tags"}


class _Frame:
    """A pyloom node being read: its slot in `records`, its keys so far, and
    whether the walk is inside its children list."""

    __slots__ = ("index", "parent", "fields", "in_children", "kids")

    def __init__(self, index: int, parent: int | None) -> None:
        self.index = index
        self.parent = parent
        self.fields: dict[str, Any] = {}
        self.in_children = False
        self.kids = 0


def parse_pyloom(events: Events, title: str, writer: TreeWriter, *, bare: bool = False) -> Parsed:
    """pyloom's nested tree, event by event. A node's id is taken when its
    object opens (in preorder) and its row written when it closes (its keys may
    come after its children); depth costs one frame, never recursion."""
    opened = 0
    by_source: dict[str, str] = {}
    top: dict[str, Any] = {}
    stack: list[_Frame] = []

    def where() -> str:
        return "root" + "".join(f".children[{f.kids - 1}]" for f in stack[:-1])

    def open_node(parent: int | None) -> None:
        nonlocal opened
        stack.append(_Frame(opened, parent))
        writer.id_for(f"\0{opened}")
        opened += 1
        check_size(opened)

    events.expect("start_map", "The file")
    if bare:  # a bare {text, children} node: the top-level object is the root
        open_node(None)
    for event, value in events:
        if not stack:
            if bare or event == "end_map":
                break
            if event == "map_key" and value == "root":
                first = next(events)
                if first[0] != "start_map":
                    raise ImportRefused("root must be an object.")
                open_node(None)
            elif event == "map_key":
                top[value] = events.value()
            continue
        frame = stack[-1]
        if frame.in_children:
            if event == "end_array":
                frame.in_children = False
            elif event == "start_map":
                frame.kids += 1
                open_node(frame.index)
            else:
                raise ImportRefused(f"{where()}.children[{frame.kids}] must be an object.")
            continue
        if event == "map_key" and value == "children":
            first = next(events)
            if first[0] == "start_array":
                frame.in_children = True
            elif first[0] != "null":
                events.skip(first)
                raise ImportRefused(
                    f"{where()}.children ({frame.fields.get('id', '?')}) must be a list."
                )
        elif event == "map_key":
            frame.fields[value] = events.value()
        elif event == "end_map":
            writer.add(_pyloom_record(frame, where(), by_source))
            stack.pop()
    events.end()
    current = top.get("selected_node_id")
    return Parsed(
        fmt="pyloom",
        title="",  # pyloom files have no title of their own: the first text names it
        fallback=title,
        records=[],
        settings=_pyloom_settings(top.get("generation_settings")),
        extra={"pyloom": top} if top else {},
        current=by_source.get(current) if isinstance(current, str) else None,
    )


def _pyloom_record(frame: _Frame, where: str, by_source: dict[str, str]) -> Rec:
    node = frame.fields
    internal = f"\0{frame.index}"
    source = as_key(node["id"], f"{where}.id") if "id" in node else ""
    if source:
        if source in by_source:
            raise ImportRefused(f"Node id {source!r} appears twice ({where}).")
        by_source[source] = internal
    label = source or "no id"
    text = as_str(node.get("text", ""), f"{where}.text ({label})")
    tags = node.get("tags") or []
    if not isinstance(tags, list):
        raise ImportRefused(f"{where}.tags ({label}) must be a list.")
    meta: dict = node["meta"] if isinstance(node.get("meta"), dict) else {}
    is_model = meta.get("source") == "AI" or "generation" in node
    gen: dict = node["generation"] if isinstance(node.get("generation"), dict) else {}
    fields = {}
    if is_model:
        fields = {
            "checkpoint": str(gen.get("model") or "")[:300],
            "request_id": str(gen.get("id") or "")[:200],
        }
    return Rec(
        key=internal,
        parent=None if frame.parent is None else f"\0{frame.parent}",
        text=text,
        author=Author.MODEL if is_model else Author.HUMAN,
        bookmarked="bookmark" in tags,
        archived="archived" in tags,
        tags=[t for t in tags if t not in ("bookmark", "archived")],
        extra={k: v for k, v in node.items() if k not in _PYLOOM_OWN},
        source_id=source,
        created_at=as_when(meta.get("creation_timestamp")),
        fields=fields,
    )


def _pyloom_settings(gs: Any) -> dict:
    if not isinstance(gs, dict):
        return {}
    out = {}
    for theirs, ours, kind in (
        ("num_continuations", "n", int),
        ("temperature", "temperature", float),
        ("top_p", "top_p", float),
        ("response_length", "max_tokens", int),
    ):
        v = gs.get(theirs)
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[ours] = kind(v)
    return out
