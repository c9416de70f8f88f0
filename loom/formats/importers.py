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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from diff_match_patch import diff_match_patch
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from loom.formats.exporters import WEFT_FORMAT
from loom.formats.jsonstream import Events, JSONRefused
from loom.models import NODE_TABLE, Author, Node, Tree

MAX_IMPORT_BYTES = 64 * 1024 * 1024
MAX_IMPORT_NODES = 1_000_000


class ImportRefused(ValueError):
    """The file cannot be imported; the message says why."""


@dataclass(slots=True)
class Rec:
    key: str
    parent: str | None
    text: str
    author: str = Author.HUMAN
    bookmarked: bool = False
    archived: bool = False
    tags: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    source_id: str = ""
    created_at: datetime | None = None
    fields: dict = field(default_factory=dict)  # other Node columns (Weft JSON)


@dataclass
class Parsed:
    fmt: str
    title: str
    records: list[Rec]
    settings: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    current: str | None = None


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
        if filename.lower().endswith((".jsonl", ".ndjson")):
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


# --- checks shared by the parsers -------------------------------------------------------


def _str(value: Any, what: str, *, allow_none: bool = False) -> str:
    if value is None and allow_none:
        return ""
    if not isinstance(value, str):
        raise ImportRefused(f"{what} must be a string, not {type(value).__name__}.")
    return value


def _dict(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise ImportRefused(f"{what} must be an object, not {type(value).__name__}.")
    return value


def _key(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ImportRefused(f"{what} must be a string or number.")
    return str(value)


def _when(value: Any) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        # Milliseconds since the epoch (JavaScript) when that large, else seconds.
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        try:
            parsed = parse_datetime(value)
            if parsed is not None and timezone.is_naive(parsed):
                parsed = timezone.make_aware(parsed, UTC)
        except (ValueError, OverflowError):
            return None
        return parsed
    return None


def order_flat(
    records: dict[str, Rec], child_order: dict[str, list[str]] | None = None
) -> list[Rec]:
    """Parent-before-child order for records that name their parent, checking
    that every parent exists and that there is no cycle (iterative DFS)."""
    kids: dict[str | None, list[str]] = {}
    for rec in records.values():
        if rec.parent is not None and rec.parent not in records:
            raise ImportRefused(
                f"Node {rec.key!r} names a parent {rec.parent!r} that is not in the file."
            )
        kids.setdefault(rec.parent, []).append(rec.key)
    if child_order:
        for parent, order in child_order.items():
            if parent in kids:
                rank = {k: i for i, k in enumerate(order)}
                kids[parent].sort(key=lambda k: rank.get(k, len(rank)))
    roots = kids.get(None, [])
    if not roots:
        raise ImportRefused("The file has no root node (every node has a parent).")
    out: list[Rec] = []
    stack = list(reversed(roots))
    while stack:
        key = stack.pop()
        out.append(records[key])
        stack.extend(reversed(kids.get(key, [])))
    if len(out) != len(records):
        raise ImportRefused(
            f"{len(records) - len(out)} node(s) are not reachable from a root: their parents form a cycle."
        )
    return out


def _single_root(records: list[Rec]) -> list[Rec]:
    """Weft trees have one root; several roots go under a new empty one."""
    roots = [r for r in records if r.parent is None]
    if len(roots) == 1:
        return records
    top = Rec(key="\0root", parent=None, text="")
    for r in roots:
        r.parent = top.key
    return [top, *records]


def _check_size(n: int) -> None:
    if n > MAX_IMPORT_NODES:
        raise ImportRefused(f"The file has {n:,} nodes; the limit is {MAX_IMPORT_NODES:,}.")


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
    head = _dict(doc.get("tree"), "'tree'")
    if "nodes" not in doc:
        raise ImportRefused("'nodes' must be a list.")
    current = head.get("current")
    return Parsed(
        fmt="weft",
        title=_str(head.get("title") or "Imported tree", "tree.title"),
        records=[],
        settings=_dict(head.get("settings") or {}, "tree.settings"),
        extra=_dict(head.get("extra") or {}, "tree.extra"),
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
            raise ImportRefused(f"Line {number}: {exc}") from None
        writer.add(_weft_record(number - 1, node))
    return Parsed(fmt="jsonl", title=title, records=[])


def _weft_record(i: int, n: Any) -> Rec:
    n = _dict(n, f"nodes[{i}]")
    key = _key(n.get("id"), f"nodes[{i}].id")
    parent = n.get("parent_id")
    author = n.get("author", Author.HUMAN)
    if author not in Author.values:
        raise ImportRefused(f"Node {key!r}: author must be 'human' or 'model'.")
    extra_fields = {
        name: _weft_field(key, name, n[name]) for name in _WEFT_FIELDS if n.get(name) is not None
    }
    if "visited_at" in extra_fields:
        extra_fields["visited_at"] = _when(extra_fields["visited_at"])
    tags = n.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ImportRefused(f"Node {key!r}: tags must be a list of strings.")
    return Rec(
        key=key,
        parent=None if parent is None else _key(parent, f"node {key!r} parent_id"),
        text=_str(n.get("text"), f"Node {key!r}: text"),
        author=author,
        bookmarked=bool(n.get("bookmarked")),
        archived=bool(n.get("archived")),
        tags=tags,
        extra=_dict(n.get("extra") or {}, f"Node {key!r}: extra"),
        source_id=_str(n.get("source_id") or "", f"Node {key!r}: source_id"),
        created_at=_when(n.get("created_at")),
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
        _check_size(opened)

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
    source = _key(node["id"], f"{where}.id") if "id" in node else ""
    if source:
        if source in by_source:
            raise ImportRefused(f"Node id {source!r} appears twice ({where}).")
        by_source[source] = internal
    label = source or "no id"
    text = _str(node.get("text", ""), f"{where}.text ({label})")
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
        created_at=_when(meta.get("creation_timestamp")),
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
        nodes = _dict(note.get("nodes"), f"state[{path!r}].nodes")
        _check_size(len(nodes))
        records: dict[str, Rec] = {}
        for uid, n in nodes.items():
            n = _dict(n, f"node {uid!r}")
            parent = n.get("parentId")
            records[uid] = Rec(
                key=uid,
                parent=None if parent is None else _key(parent, f"node {uid!r} parentId"),
                text=_str(n.get("text", ""), f"node {uid!r} text"),
                bookmarked=bool(n.get("bookmarked")),
                source_id=uid,
                created_at=_when(n.get("lastVisited")),
                extra={k: v for k, v in n.items() if k not in ("text", "parentId", "bookmarked")},
            )
        current = note.get("current")
        out.append(
            Parsed(
                fmt="loomsidian",
                title=path.rsplit("/", 1)[-1].removesuffix(".md") or "Imported note",
                records=_single_root(order_flat(records)),
                extra={"loomsidian": {"note": path, "hoisted": note.get("hoisted", [])}},
                current=current if isinstance(current, str) else None,
            )
        )
    return out


# --- exoloom ---------------------------------------------------------------------------------


def parse_exoloom(doc: dict, title: str) -> Parsed:
    tree = _dict(doc.get("tree"), "'tree'")
    nodes = _dict(tree.get("nodes"), "tree.nodes")
    _check_size(len(nodes))
    lens = doc.get("lens") if isinstance(doc.get("lens"), dict) else {}
    marked = {str(b.get("nodeId")) for b in lens.get("bookmarks") or [] if isinstance(b, dict)}
    pruned = {str(b.get("nodeId")) for b in lens.get("prunedNodes") or [] if isinstance(b, dict)}
    records: dict[str, Rec] = {}
    order: dict[str, list[str]] = {}
    for nid, n in nodes.items():
        n = _dict(n, f"node {nid!r}")
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
            parent=None if parent is None else _key(parent, f"node {nid!r} parentId"),
            text=_str(n.get("content", ""), f"node {nid!r} content"),
            author=Author.MODEL if kind == "LLM" else Author.HUMAN,
            bookmarked=nid in marked,
            archived=nid in pruned,
            source_id=nid,
            created_at=_when(n.get("createdAt")),
            fields={"checkpoint": str(n.get("authorName") or "")[:300]} if kind == "LLM" else {},
            extra={"authorName": n.get("authorName")} if n.get("authorName") else {},
        )
    root = tree.get("rootNodeId")
    if root is not None and str(root) not in records:
        raise ImportRefused(f"tree.rootNodeId {root!r} is not among the nodes.")
    return Parsed(
        fmt="exoloom",
        title=_str(tree.get("title") or title, "tree.title"),
        records=_single_root(order_flat(records, order)),
        extra={
            "exoloom": {"version": doc.get("version"), "schemaVersion": doc.get("schemaVersion")}
        },
    )


# --- MiniLoom --------------------------------------------------------------------------------


def parse_miniloom(doc: dict, title: str) -> Parsed:
    """Each MiniLoom node holds a diff-match-patch patch against its parent's
    full text. Rebuild full texts top-down; a node's segment is what it adds
    to its parent's text. A node that rewrites its parent's text instead of
    extending it keeps its full text in extra['full_text'] and its segment is
    the part after the common prefix."""
    store = _dict(_dict(doc["loomTree"], "loomTree").get("nodeStore"), "loomTree.nodeStore")
    _check_size(len(store))
    dmp = diff_match_patch()
    records: dict[str, Rec] = {}
    order: dict[str, list[str]] = {}
    patches: dict[str, str] = {}
    for nid, n in store.items():
        n = _dict(n, f"node {nid!r}")
        parent = n.get("parent")
        kids = n.get("children") or []
        if not isinstance(kids, list):
            raise ImportRefused(f"Node {nid!r}: children must be a list.")
        order[nid] = [str(k) for k in kids]
        patch = n.get("patch", "")
        if isinstance(patch, list):  # some versions store patch objects serialised as text lines
            patch = "".join(str(p) for p in patch)
        patches[nid] = _str(patch, f"node {nid!r} patch")
        is_model = n.get("type") == "gen"
        records[nid] = Rec(
            key=nid,
            parent=None if parent in (None, "") else _key(parent, f"node {nid!r} parent"),
            text="",
            author=Author.MODEL if is_model else Author.HUMAN,
            source_id=nid,
            created_at=_when(n.get("timestamp")),
            fields={
                k: v
                for k, v in {
                    "checkpoint": str(n.get("model") or "")[:300] if is_model else "",
                    "finish_reason": str(n.get("finishReason") or "")[:20],
                }.items()
                if v
            },
            extra={
                k: n[k]
                for k in ("type", "summary", "rating", "read", "model", "finishReason")
                if k in n
            },
        )
    ordered = order_flat(records, order)
    path = _TextPath()
    for rec in ordered:
        path.cut_to(rec.parent)
        segment = _appended(dmp, patches[rec.key], path, rec.key)
        if segment is not None:
            rec.text = segment
            path.push(rec.key, segment, full=False)
            continue
        base = path.text()
        try:
            text, ok = dmp.patch_apply(dmp.patch_fromText(patches[rec.key]), base)
        except ValueError as exc:
            raise ImportRefused(f"Node {rec.key!r}: its patch cannot be read ({exc}).") from None
        if not all(ok):
            raise ImportRefused(f"Node {rec.key!r}: its patch does not apply to its parent's text.")
        if text.startswith(base):
            rec.text = text[len(base) :]
            path.push(rec.key, rec.text, full=False)
        else:
            rec.text = text[_common_prefix(base, text) :]
            rec.extra["full_text"] = text
            path.push(rec.key, text, full=True)
    focus = doc.get("focus")
    focus_id = focus.get("id") if isinstance(focus, dict) else focus
    return Parsed(
        fmt="miniloom",
        title=title,
        records=_single_root(ordered),
        extra={"miniloom": {"focus": focus_id}},
        current=str(focus_id) if isinstance(focus_id, str | int) else None,
    )


class _TextPath:
    """The full text along the walk's current path, kept as the segments each
    node adds (or a node's whole text, where it rewrote its parent's). Moving
    to a node cuts the path back to its parent, so memory is one path and a
    node that only appends costs its own patch, not its depth."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.parts: list[str] = []
        self.lengths: list[int] = []  # full text length at each level
        self.full_at: list[int] = []  # levels whose part is a whole text

    def cut_to(self, key: str | None) -> None:
        while self.keys and self.keys[-1] != key:
            self.keys.pop()
            self.parts.pop()
            self.lengths.pop()
            if self.full_at and self.full_at[-1] >= len(self.keys):
                self.full_at.pop()

    def push(self, key: str, part: str, *, full: bool) -> None:
        if full:
            self.full_at.append(len(self.keys))
        self.lengths.append(len(part) if full else self.length() + len(part))
        self.keys.append(key)
        self.parts.append(part)

    def length(self) -> int:
        return self.lengths[-1] if self.lengths else 0

    def tail(self, n: int) -> str:
        """The last n characters: reads back only as many parts as that takes."""
        got: list[str] = []
        size = 0
        start = self.full_at[-1] if self.full_at else 0
        for i in range(len(self.parts) - 1, start - 1, -1):
            if size >= n:
                break
            got.append(self.parts[i])
            size += len(self.parts[i])
        return "".join(reversed(got))[-n:] if n else ""

    def text(self) -> str:
        start = self.full_at[-1] if self.full_at else 0
        return "".join(self.parts[start:])


def _appended(dmp: diff_match_patch, patch_text: str, path: _TextPath, key: str) -> str | None:
    """What the patch adds when it only appends to the parent's text (how a
    MiniLoom child usually extends its parent), read from the patch alone:
    one hunk ending at the parent's end whose context matches the parent's
    tail. None for any other patch, which is then applied in full."""
    try:
        patches = dmp.patch_fromText(patch_text)
    except ValueError as exc:
        raise ImportRefused(f"Node {key!r}: its patch cannot be read ({exc}).") from None
    if not patches:
        return ""
    if len(patches) != 1:
        return None
    patch = patches[0]
    diffs = patch.diffs
    if not diffs or diffs[-1][0] != dmp.DIFF_INSERT or len(diffs) > 2:
        return None
    context = diffs[0][1] if len(diffs) == 2 else ""
    if len(diffs) == 2 and diffs[0][0] != dmp.DIFF_EQUAL:
        return None
    if patch.length1 != len(context) or patch.start1 + patch.length1 != path.length():
        return None
    if path.tail(len(context)) != context:
        return None
    return diffs[-1][1]


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


# --- writing ------------------------------------------------------------------------------------


class TreeWriter:
    """Writes a tree's nodes as they are read, in batches. Ids come from the
    sequence on first sight of a key — as a node or as a parent named before
    its node — and foreign keys are checked at commit (Postgres defers them),
    so a child may be written before its parent. What stays in memory is the
    skeleton (key -> id, id -> parent id) for the checks at the end."""

    # Rows per INSERT: a batch's Node objects, adapted parameters and SQL are
    # most of the import's peak memory; 500 keeps it a few MB at full speed.
    BATCH = 500
    ID_BLOCK = 1000

    def __init__(self, owner) -> None:
        self.tree = Tree.objects.create(owner=owner, title="Imported tree")
        self.ids: dict[str, int] = {}
        self.parent_of: dict[int, int | None] = {}
        self.next_position: dict[int | None, int] = {}
        self.batch: list[Node] = []
        self.free: list[int] = []
        self.first_root: int | None = None
        self.now = timezone.now()

    def id_for(self, key: str) -> int:
        node_id = self.ids.get(key)
        if node_id is None:
            if not self.free:
                self.free = _allocate_ids(self.ID_BLOCK)[::-1]
            node_id = self.ids[key] = self.free.pop()
        return node_id

    def add(self, rec: Rec) -> None:
        node_id = self.id_for(rec.key)
        if node_id in self.parent_of:
            raise ImportRefused(f"Node id {rec.key!r} appears twice.")
        parent_id = None if rec.parent is None else self.id_for(rec.parent)
        self.parent_of[node_id] = parent_id
        _check_size(len(self.parent_of))
        if parent_id is None and self.first_root is None:
            self.first_root = node_id
        fields = dict(rec.fields)
        position = fields.pop("position", None)
        if position is None:
            position = self.next_position.get(parent_id, 0)
        self.next_position[parent_id] = position + 1
        self.batch.append(
            Node(
                id=node_id,
                tree=self.tree,
                parent_id=parent_id,
                position=position,
                text=rec.text,
                author=rec.author,
                bookmarked=rec.bookmarked,
                archived=rec.archived,
                tags=rec.tags,
                extra=rec.extra,
                source_id=rec.source_id[:100],
                created_at=rec.created_at or self.now,
                **fields,
            )
        )
        if len(self.batch) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            Node.objects.bulk_create(self.batch)
            self.batch = []

    def check(self, *, one_root: bool) -> None:
        """What order_flat checks for a file held in memory: every parent is in
        the file, there is a root (one, for Weft), and no parents form a cycle."""
        for key, node_id in self.ids.items():
            if node_id not in self.parent_of:
                raise ImportRefused(f"A node names a parent {key!r} that is not in the file.")
        kids: dict[int, list[int]] = {}
        roots = []
        for node_id, parent_id in self.parent_of.items():
            if parent_id is None:
                roots.append(node_id)
            else:
                kids.setdefault(parent_id, []).append(node_id)
        if not roots:
            raise ImportRefused("The file has no root node (every node has a parent).")
        if one_root and len(roots) != 1:
            raise ImportRefused("A Weft tree has exactly one root node.")
        reached, stack = 0, list(roots)
        while stack:
            reached += 1
            stack.extend(kids.pop(stack.pop(), ()))
        if reached != len(self.parent_of):
            raise ImportRefused(
                f"{len(self.parent_of) - reached} node(s) are not reachable from a root: "
                "their parents form a cycle."
            )

    def finish(self, parsed: Parsed, *, one_root: bool = False, check: bool = True) -> Tree:
        self.flush()
        if check:
            self.check(one_root=one_root)
        tree = self.tree
        tree.title = parsed.title[:200] or "Imported tree"
        tree.settings = parsed.settings
        tree.extra = parsed.extra
        current = self.ids.get(parsed.current) if parsed.current else None
        tree.current_id = current if current in self.parent_of else self.first_root
        tree.save(update_fields=["title", "settings", "extra", "current"])
        return tree


def _allocate_ids(n: int) -> list[int]:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT nextval(pg_get_serial_sequence('{NODE_TABLE}', 'id')) "  # noqa: S608
            "FROM generate_series(1, %s)",
            [n],
        )
        return [row[0] for row in cur.fetchall()]


def write_tree(owner, parsed: Parsed) -> Tree:
    """A file already read whole and checked (the flat formats), parents first."""
    writer = TreeWriter(owner)
    for rec in parsed.records:
        writer.add(rec)
    return writer.finish(parsed, check=False)
