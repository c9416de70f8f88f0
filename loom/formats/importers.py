"""Import a tree file: detect the format, turn it into flat records in
parent-before-child order (iteratively: no recursion limit on deep trees),
check everything, then write it in one transaction. Any problem raises
ImportRefused naming what is wrong, and nothing is created."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from diff_match_patch import diff_match_patch
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from loom.formats.exporters import WEFT_FORMAT
from loom.models import NODE_TABLE, Author, Node, Tree

MAX_IMPORT_BYTES = 64 * 1024 * 1024
MAX_IMPORT_NODES = 1_000_000


class ImportRefused(ValueError):
    """The file cannot be imported; the message says why."""


@dataclass
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


def import_file(owner, data: bytes, *, filename: str = "") -> list[Tree]:
    """Parse and store; returns the new trees (a loomsidian file may hold several notes)."""
    parsed = parse(data, filename=filename)
    with transaction.atomic():
        return [write_tree(owner, p) for p in parsed]


def parse(data: bytes, *, filename: str = "") -> list[Parsed]:
    if len(data) > MAX_IMPORT_BYTES:
        raise ImportRefused(
            f"The file is {len(data):,} bytes; the limit is {MAX_IMPORT_BYTES:,} bytes."
        )
    if not data.strip():
        raise ImportRefused("The file is empty.")
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        raise ImportRefused("The file is not UTF-8 text.") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        text = exc.doc
        runs_to_end = exc.msg.startswith("Unterminated string") and "\n" not in text[exc.pos :]
        if exc.pos >= len(text.rstrip()) - 1 or runs_to_end:
            raise ImportRefused(f"The file ends early ({where}): it looks truncated.") from None
        raise ImportRefused(f"The file is not valid JSON at {where}: {exc.msg}.") from None
    except RecursionError:
        raise ImportRefused("The file nests JSON too deeply to read.") from None
    fmt = detect(doc)
    base = filename.rsplit("/", 1)[-1].rsplit(".", 1)[0] or "Imported tree"
    if fmt == "weft":
        return [parse_weft(doc)]
    if fmt == "pyloom":
        return [parse_pyloom(doc, base)]
    if fmt == "loomsidian":
        return parse_loomsidian(doc)
    if fmt == "exoloom":
        return [parse_exoloom(doc, base)]
    return [parse_miniloom(doc, base)]


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
        if isinstance(doc.get("state"), dict) and all(
            isinstance(v, dict) and "nodes" in v for v in doc["state"].values()
        ):
            return "loomsidian"
        if isinstance(doc.get("root"), dict) or ("text" in doc and "children" in doc):
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
        except ValueError:
            return None
        if parsed is not None and timezone.is_naive(parsed):
            parsed = timezone.make_aware(parsed, UTC)
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

_WEFT_FIELDS = {
    "position": int,
    "checkpoint": str,
    "request_id": str,
    "finish_reason": str,
    "visited_at": str,
    "params": object,
    "seed": int,
    "logprobs": object,
}


def parse_weft(doc: dict) -> Parsed:
    if doc.get("version") != 1:
        raise ImportRefused(f"Unsupported Weft JSON version {doc.get('version')!r} (expected 1).")
    head = _dict(doc.get("tree"), "'tree'")
    nodes = doc.get("nodes")
    if not isinstance(nodes, list):
        raise ImportRefused("'nodes' must be a list.")
    _check_size(len(nodes))
    records: dict[str, Rec] = {}
    for i, n in enumerate(nodes):
        n = _dict(n, f"nodes[{i}]")
        key = _key(n.get("id"), f"nodes[{i}].id")
        if key in records:
            raise ImportRefused(f"Node id {key!r} appears twice.")
        parent = n.get("parent_id")
        author = n.get("author", Author.HUMAN)
        if author not in Author.values:
            raise ImportRefused(f"Node {key!r}: author must be 'human' or 'model'.")
        extra_fields = {}
        for name, kind in _WEFT_FIELDS.items():
            if n.get(name) is None:
                continue
            if kind is not object and (not isinstance(n[name], kind) or isinstance(n[name], bool)):
                raise ImportRefused(f"Node {key!r}: {name} must be {kind.__name__}.")
            extra_fields[name] = n[name]
        if "visited_at" in extra_fields:
            extra_fields["visited_at"] = _when(extra_fields["visited_at"])
        tags = n.get("tags") or []
        if not isinstance(tags, list):
            raise ImportRefused(f"Node {key!r}: tags must be a list.")
        records[key] = Rec(
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
    ordered = order_flat(records)
    if sum(1 for r in ordered if r.parent is None) != 1:
        raise ImportRefused("A Weft tree has exactly one root node.")
    current = head.get("current")
    return Parsed(
        fmt="weft",
        title=_str(head.get("title") or "Imported tree", "tree.title"),
        records=ordered,
        settings=_dict(head.get("settings") or {}, "tree.settings"),
        extra=_dict(head.get("extra") or {}, "tree.extra"),
        current=None if current is None else str(current),
    )


# --- pyloom ---------------------------------------------------------------------------------

_PYLOOM_OWN = {"id", "text", "children", "parent_id", "tags"}


def parse_pyloom(doc: dict, title: str) -> Parsed:
    root = doc["root"] if "root" in doc else doc
    top = {k: v for k, v in doc.items() if k != "root"} if "root" in doc else {}
    records: list[Rec] = []
    seen: set[str] = set()
    # Explicit stack of (node, parent key, path for messages).
    stack: list[tuple[Any, str | None, str]] = [(root, None, "root")]
    while stack:
        node, parent, where = stack.pop()
        node = _dict(node, where)
        key = _key(node.get("id", f"\0{len(records)}"), f"{where}.id")
        if key in seen:
            raise ImportRefused(f"Node id {key!r} appears twice ({where}).")
        seen.add(key)
        text = _str(node.get("text", ""), f"{where}.text ({key})")
        children = node.get("children", [])
        if not isinstance(children, list):
            raise ImportRefused(f"{where}.children ({key}) must be a list.")
        tags = node.get("tags") or []
        if not isinstance(tags, list):
            raise ImportRefused(f"{where}.tags ({key}) must be a list.")
        meta = node.get("meta") if isinstance(node.get("meta"), dict) else {}
        is_model = meta.get("source") == "AI" or "generation" in node
        gen = node.get("generation") if isinstance(node.get("generation"), dict) else {}
        fields = {}
        if is_model:
            fields = {
                "checkpoint": str(gen.get("model") or "")[:300],
                "request_id": str(gen.get("id") or "")[:200],
            }
        records.append(
            Rec(
                key=key,
                parent=parent,
                text=text,
                author=Author.MODEL if is_model else Author.HUMAN,
                bookmarked="bookmark" in tags,
                archived="archived" in tags,
                tags=[t for t in tags if t not in ("bookmark", "archived")],
                extra={k: v for k, v in node.items() if k not in _PYLOOM_OWN},
                source_id=key if "id" in node else "",
                created_at=_when(meta.get("creation_timestamp")),
                fields=fields,
            )
        )
        _check_size(len(records) + len(stack))
        for i in range(len(children) - 1, -1, -1):
            stack.append((children[i], key, f"{where}.children[{i}]"))
    current = top.get("selected_node_id")
    return Parsed(
        fmt="pyloom",
        title=title,
        records=records,
        settings=_pyloom_settings(top.get("generation_settings")),
        extra={"pyloom": top} if top else {},
        current=current if isinstance(current, str) else None,
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
    full: dict[str, str] = {}
    remaining_kids = {k: len(order.get(k, [])) for k in records}
    for rec in ordered:
        base = full[rec.parent] if rec.parent is not None else ""
        try:
            text, ok = dmp.patch_apply(dmp.patch_fromText(patches[rec.key]), base)
        except ValueError as exc:
            raise ImportRefused(f"Node {rec.key!r}: its patch cannot be read ({exc}).") from None
        if not all(ok):
            raise ImportRefused(f"Node {rec.key!r}: its patch does not apply to its parent's text.")
        if text.startswith(base):
            rec.text = text[len(base) :]
        else:
            rec.text = text[_common_prefix(base, text) :]
            rec.extra["full_text"] = text
        full[rec.key] = text
        # Drop a parent's full text once its last child is built: memory stays
        # proportional to the open branch, not the whole tree.
        if rec.parent is not None:
            remaining_kids[rec.parent] -= 1
            if remaining_kids[rec.parent] <= 0:
                full.pop(rec.parent, None)
    focus = doc.get("focus")
    focus_id = focus.get("id") if isinstance(focus, dict) else focus
    return Parsed(
        fmt="miniloom",
        title=title,
        records=_single_root(ordered),
        extra={"miniloom": {"focus": focus_id}},
        current=str(focus_id) if isinstance(focus_id, str | int) else None,
    )


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


# --- writing ------------------------------------------------------------------------------------


def _allocate_ids(n: int) -> list[int]:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT nextval(pg_get_serial_sequence('{NODE_TABLE}', 'id')) "  # noqa: S608
            "FROM generate_series(1, %s)",
            [n],
        )
        return [row[0] for row in cur.fetchall()]


def write_tree(owner, parsed: Parsed) -> Tree:
    """Insert the records (already checked and parent-first) with ids taken
    from the sequence up front, so parents are known without a query per node."""
    records = parsed.records
    tree = Tree.objects.create(
        owner=owner, title=parsed.title[:200], settings=parsed.settings, extra=parsed.extra
    )
    ids = _allocate_ids(len(records))
    id_of = {rec.key: ids[i] for i, rec in enumerate(records)}
    next_position: dict[int | None, int] = {}
    now = timezone.now()

    def build() -> Iterable[Node]:
        for rec in records:
            parent_id = id_of[rec.parent] if rec.parent is not None else None
            fields = dict(rec.fields)
            position = fields.pop("position", None)
            if position is None:
                position = next_position.get(parent_id, 0)
            next_position[parent_id] = position + 1
            yield Node(
                id=id_of[rec.key],
                tree=tree,
                parent_id=parent_id,
                position=position,
                text=rec.text,
                author=rec.author,
                bookmarked=rec.bookmarked,
                archived=rec.archived,
                tags=rec.tags,
                extra=rec.extra,
                source_id=rec.source_id[:100],
                created_at=rec.created_at or now,
                **fields,
            )

    batch: list[Node] = []
    for node in build():
        batch.append(node)
        if len(batch) >= 2000:
            Node.objects.bulk_create(batch)
            batch = []
    if batch:
        Node.objects.bulk_create(batch)
    tree.current_id = id_of.get(parsed.current) if parsed.current else None
    if tree.current_id is None:
        tree.current_id = ids[0]
    tree.save(update_fields=["current"])
    return tree
