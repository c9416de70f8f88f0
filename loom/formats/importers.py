"""Import a tree file: detect the format, turn it into flat records in
parent-before-child order (iteratively: no recursion limit on deep trees),
check everything, then write it in one transaction. Any problem raises
ImportRefused naming what is wrong, and nothing is created.

Files are read with ijson (loom.formats.jsonstream), never json.loads: Weft JSON
node by node, JSONL line by line, pyloom's nesting event by event with an
explicit stack. Only the flat formats (loomsidian, exoloom, MiniLoom) are built
as one document, and only their top-level keys are read before the format is
known."""

from __future__ import annotations

import io
import os
from typing import IO, Any

from django.db import transaction

from loom.formats.exporters import WEFT_FORMAT
from loom.formats.jsonstream import Events, JSONRefused
from loom.formats.miniloom import parse_miniloom
from loom.formats.records import (
    MAX_IMPORT_BYTES,
    MAX_IMPORT_NODES,
    ImportRefused,
    Parsed,
    Rec,
    TreeWriter,
    as_dict,
    as_key,
    as_str,
    as_when,
    check_size,
    order_flat,
    single_root,
    write_tree,
)
from loom.models import Author, Node, Tree

__all__ = ["MAX_IMPORT_BYTES", "MAX_IMPORT_NODES", "ImportRefused", "import_file"]

# --- entry point ---------------------------------------------------------------------


def import_file(owner, data: bytes | IO[bytes], *, filename: str = "") -> list[Tree]:
    """Parse and store; returns the new trees (a loomsidian file may hold several notes).
    `data` is the file's bytes or a binary file (an upload), read incrementally.

    Weft JSON, JSONL and pyloom are written while they are read, in batches, so
    memory holds one batch and the id skeleton, not the tree; the transaction
    makes a refusal found late (a missing parent, a bad field in the last node)
    leave nothing behind."""
    with transaction.atomic():
        return parse(data, filename=filename, owner=owner)


def file_size(source: IO[bytes]) -> int:
    at = source.tell()
    size = source.seek(0, os.SEEK_END)
    source.seek(at)
    return size


def parse(data: bytes | IO[bytes], *, filename: str = "", owner) -> list[Tree]:
    source = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    source.seek(0)
    size = file_size(source)
    if size > MAX_IMPORT_BYTES:
        raise ImportRefused(f"The file is {size:,} bytes; the limit is {MAX_IMPORT_BYTES:,} bytes.")
    if not source.read(64 * 1024).strip():
        raise ImportRefused("The file is empty.")
    source.seek(0)
    base = filename.rsplit("/", 1)[-1].split(".", 1)[0] or "Imported tree"
    try:
        if filename.lower().endswith((".jsonl", ".ndjson")) or is_weft_jsonl(source):
            writer = TreeWriter(owner)
            return [writer.finish(parse_jsonl(source, base, writer), one_root=True)]
        head = read_head(Events(source))
        fmt = detect(head)
        if fmt in ("weft", "pyloom"):
            source.seek(0)
            events = Events(source)
            writer = TreeWriter(owner)
            if fmt == "weft":
                return [writer.finish(parse_weft(events, writer), one_root=True)]
            bare = not _is_map(head.get("root"))
            return [writer.finish(parse_pyloom(events, base, writer, bare=bare))]
        if fmt == "loomsidian":
            parsed = parse_loomsidian(head)
        elif fmt == "exoloom":
            parsed = [parse_exoloom(head, base)]
        else:
            parsed = [parse_miniloom(head, base)]
        return [write_tree(owner, p) for p in parsed]
    except JSONRefused as exc:
        raise ImportRefused(str(exc)) from None


# The longest first line looked at when sniffing for JSONL: a node record with
# logprobs is tens of kilobytes; a one-line JSON document of many megabytes is
# not parsed twice.
SNIFF_LINE_BYTES = 1024 * 1024
_WEFT_RECORD_KEYS = {"id", "parent_id", "text"}


def is_weft_jsonl(source: IO[bytes]) -> bool:
    """Weft's JSONL export under another name (a browser's "nodes.json", a
    renamed download): its first line is one whole node record by itself."""
    source.seek(0)
    line = source.readline(SNIFF_LINE_BYTES)
    source.seek(0)
    if not line.endswith(b"\n") or not line.lstrip().startswith(b"{"):
        return False  # longer than the limit, or the whole file is one line
    try:
        events = Events(io.BytesIO(line))
        first = events.value()
        events.end()
    except JSONRefused:
        return False
    # A pyloom node has id, text and maybe parent_id too, but always its children.
    return isinstance(first, dict) and _WEFT_RECORD_KEYS <= first.keys() and "children" not in first


class Deferred:
    """A top-level value read past while detecting the format (pyloom's root,
    Weft's nodes): the streaming parser reads it on its own pass."""

    def __init__(self, event: str) -> None:
        self.is_map = event == "start_map"


_DEFERRED_KEYS = {"root", "nodes", "children"}


def read_head(events: Events) -> dict[str, Any]:
    """The top-level object with its big keys left unread. Weft's and pyloom's
    own files say what they are in their first key: the read stops there, so a
    big file is not read through twice."""
    event, _ = next(events)
    if event != "start_map":
        events.skip((event, _))
        events.end()
        return {}
    head: dict[str, Any] = {}
    for event, key in events:
        if event == "end_map":
            break
        if key in _DEFERRED_KEYS:
            head[key] = Deferred(events.skip())
        else:
            head[key] = events.value()
        if len(head) == 1 and detect_early(head):
            return head
    events.end()
    return head


def detect_early(head: dict[str, Any]) -> bool:
    return head.get("format") == WEFT_FORMAT or _is_map(head.get("root"))


def _is_map(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, Deferred) and value.is_map)


def detect(doc: Any) -> str:
    if isinstance(doc, dict):
        if doc.get("format") == WEFT_FORMAT:
            return "weft"
        if doc.get("loomType") == "Exoloom" or (
            isinstance(doc.get("tree"), dict) and "rootNodeId" in doc["tree"]
        ):
            return "exoloom"
        if isinstance(doc.get("loomTree"), dict):
            return "miniloom"
        if (
            isinstance(doc.get("state"), dict)
            and doc["state"]
            and all(isinstance(v, dict) and "nodes" in v for v in doc["state"].values())
        ):
            return "loomsidian"
        if _is_map(doc.get("root")) or ("text" in doc and "children" in doc):
            return "pyloom"
    raise ImportRefused(
        "Unrecognised file: expected Weft JSON, pyloom JSON (a 'root' node), loomsidian "
        "data.json (a 'state' object), an exoloom export ('loomType': 'Exoloom') or a "
        "MiniLoom file (a 'loomTree' object)."
    )


# --- Weft JSON ---------------------------------------------------------------------------

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
}


def _weft_field(key: str, name: str, value: Any) -> Any:
    kind, low, high = _WEFT_FIELDS[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ImportRefused(f"Node {key!r}: {name} must be {_KIND_NAMES[kind]}.")
    if kind is int and not low <= value <= high:
        raise ImportRefused(f"Node {key!r}: {name} must be between {low:,} and {high:,}.")
    if kind is str and len(value) > high:
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
        if key != "nodes":
            doc[key] = events.value()
            continue
        doc[key] = True
        events.expect("start_array", "'nodes'")
        for i, first in enumerate(events):
            if first[0] == "end_array":
                break
            writer.add(_weft_record(i, events.value(first)))
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
    )


def parse_jsonl(source: IO[bytes], title: str, writer: TreeWriter) -> Parsed:
    """Weft's JSONL export: one node object per line, each written as read."""
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            events = Events(io.BytesIO(line))
            node = events.value()
            events.end()
        except JSONRefused as exc:
            raise ImportRefused(str(exc).replace("The file", f"Line {number}", 1)) from None
        writer.add(_weft_record(number - 1, node))
    return Parsed(fmt="jsonl", title=title, records=[])


def _weft_record(i: int, n: Any) -> Rec:
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


# --- pyloom ---------------------------------------------------------------------------------

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
        title=title,
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
    meta = node.get("meta") if isinstance(node.get("meta"), dict) else {}
    is_model = meta.get("source") == "AI" or "generation" in node
    gen = node.get("generation") if isinstance(node.get("generation"), dict) else {}
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


# --- loomsidian ---------------------------------------------------------------------------


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


# --- exoloom ---------------------------------------------------------------------------------


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
        title=as_str(tree.get("title") or title, "tree.title"),
        records=single_root(order_flat(records, order)),
        extra={
            "exoloom": {"version": doc.get("version"), "schemaVersion": doc.get("schemaVersion")}
        },
    )
