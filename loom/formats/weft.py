"""Weft's own JSON export, read node by node (one node object in memory at a
time, each written as read), and the node record both Weft formats share."""

from __future__ import annotations

from typing import Any, cast

from loom.context import MAX_DEPTH
from loom.formats.jsonstream import Events
from loom.formats.records import (
    ImportRefused,
    Parsed,
    Rec,
    TreeWriter,
    as_dict,
    as_key,
    as_str,
    as_when,
)
from loom.models import Author, ChildOrder, Node, NoteUnit

# Each optional Weft column: its type and the range its database column holds.
_WEFT_FIELDS: dict[str, tuple[type, int | None, int | None]] = {
    "position": (int, 0, 2**31 - 1),
    "checkpoint": (str, None, Node._meta.get_field("checkpoint").max_length),
    "request_id": (str, None, Node._meta.get_field("request_id").max_length),
    "finish_reason": (str, None, Node._meta.get_field("finish_reason").max_length),
    "visited_at": (str, None, 64),
    "params": (dict, None, None),
    "seed": (int, -(2**63), 2**63 - 1),
    "logprobs": (dict, None, None),
    "rating": (int, -1, 1),
    "prompt_context": (dict, None, None),
}


def _weft_field(key: str, name: str, value: Any) -> Any:
    kind, low, high = _WEFT_FIELDS[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ImportRefused(f"Node {key!r}: {name} must be {_KIND_NAMES[kind]}.")
    value = cast(Any, value)  # isinstance() with a type from a variable narrows it to object
    if kind is int and low is not None and high is not None and not low <= value <= high:
        raise ImportRefused(f"Node {key!r}: {name} must be between {low:,} and {high:,}.")
    if name == "rating" and value == 0:
        return None  # no rating
    if kind is str and high is not None and len(value) > high:
        raise ImportRefused(f"Node {key!r}: {name} is longer than {high} characters.")
    if name == "logprobs":
        _check_logprobs(key, value)
    return value


_KIND_NAMES = {int: "an integer", str: "a string", dict: "an object"}


def _check_logprobs(key: str, lp: dict) -> None:
    """The completions logprobs block the token view reads: parallel lists of
    token strings, logprobs (numbers or null) and top-k dicts (or null)."""
    tokens, values, tops = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs")
    problem = ""
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        problem = "tokens must be a list of strings"
    elif values is not None and (
        not isinstance(values, list)
        or len(values) != len(tokens)
        or not all(v is None or _is_number(v) for v in values)
    ):
        problem = "token_logprobs must be a list of numbers, one per token"
    elif tops is not None and (
        not isinstance(tops, list)
        or len(tops) != len(tokens)
        or not all(
            t is None or (isinstance(t, dict) and all(_is_number(v) for v in t.values()))
            for t in tops
        )
    ):
        problem = "top_logprobs must be a list of {token: logprob} objects, one per token"
    if problem:
        raise ImportRefused(f"Node {key!r}: logprobs: {problem}.")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_weft(events: Events, writer: TreeWriter) -> Parsed:
    """Weft JSON, one node object in memory at a time, each written as read."""
    doc: dict[str, Any] = {}
    events.expect("start_map", "The file")
    for _event, key in events:
        if _event == "end_map":
            break
        if key in ("format", "version", "tree"):
            doc[key] = events.value()
            continue
        if key != "nodes":  # not Weft's: passed by, never built
            events.skip()
            continue
        doc[key] = True
        events.expect("start_array", "'nodes'")
        for i, first in enumerate(events):
            if first[0] == "end_array":
                break
            writer.add(weft_record(i, events.value(first)))
    events.end()
    if doc.get("version") != 1:
        raise ImportRefused(f"Unsupported Weft JSON version {doc.get('version')!r} (expected 1).")
    head = as_dict(doc.get("tree"), "'tree'")
    if "nodes" not in doc:
        raise ImportRefused("'nodes' must be a list.")
    current = head.get("current")
    return Parsed(
        fmt="weft",
        title=as_str(head.get("title") or "Imported tree", "tree.title"),
        records=[],
        settings=as_dict(head.get("settings") or {}, "tree.settings"),
        extra=as_dict(head.get("extra") or {}, "tree.extra"),
        current=None if current is None else str(current),
        tree_fields=_tree_fields(head),
    )


def _tree_fields(head: dict) -> dict[str, Any]:
    """The memory, author's note and children's order of a Weft JSON tree (each
    optional: files written before they existed have none)."""
    out: dict[str, Any] = {}
    for name in ("memory", "note"):
        if head.get(name) is not None:
            value = as_str(head[name], f"tree.{name}")
            if "\x00" in value:
                raise ImportRefused(f"tree.{name} holds a NUL character.")
            out[name] = value
    depth = head.get("note_depth")
    if depth is not None:
        if not isinstance(depth, int) or isinstance(depth, bool) or not 0 <= depth <= MAX_DEPTH:
            raise ImportRefused(f"tree.note_depth must be a whole number from 0 to {MAX_DEPTH:,}.")
        out["note_depth"] = depth
    for name, choices in (("note_unit", NoteUnit.values), ("child_order", ChildOrder.values)):
        if head.get(name) is not None:
            if head[name] not in choices:
                raise ImportRefused(f"tree.{name} must be one of {', '.join(choices)}.")
            out[name] = head[name]
    if head.get("hide_down") is not None:
        out["hide_down"] = bool(head["hide_down"])
    return out


def weft_record(i: int, n: Any) -> Rec:
    n = as_dict(n, f"nodes[{i}]")
    key = as_key(n.get("id"), f"nodes[{i}].id")
    parent = n.get("parent_id")
    author = n.get("author", Author.HUMAN)
    if author not in Author.values:
        raise ImportRefused(f"Node {key!r}: author must be 'human' or 'model'.")
    extra_fields = {
        name: _weft_field(key, name, n[name]) for name in _WEFT_FIELDS if n.get(name) is not None
    }
    if "visited_at" in extra_fields:
        extra_fields["visited_at"] = as_when(extra_fields["visited_at"])
    if isinstance(n.get("written_by"), str):
        extra_fields["written_by"] = n["written_by"]  # a name: TreeWriter.add decides
    tags = n.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ImportRefused(f"Node {key!r}: tags must be a list of strings.")
    return Rec(
        key=key,
        parent=None if parent is None else as_key(parent, f"node {key!r} parent_id"),
        text=as_str(n.get("text"), f"Node {key!r}: text"),
        author=author,
        bookmarked=bool(n.get("bookmarked")),
        archived=bool(n.get("archived")),
        tags=tags,
        extra=as_dict(n.get("extra") or {}, f"Node {key!r}: extra"),
        source_id=as_str(n.get("source_id") or "", f"Node {key!r}: source_id"),
        created_at=as_when(n.get("created_at")),
        fields=extra_fields,
    )
