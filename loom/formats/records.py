"""What every importer produces and how it is stored: the flat record of a
node, the checks the parsers share, and TreeWriter, which writes records in
batches as a file is read (loom.formats.importers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from loom.models import Author, Node, Tree
from loom.sql import NODE_TABLE

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
    title: str  # the file's own title; "" when it has none (the first text is used)
    records: list[Rec]
    settings: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    current: str | None = None
    fallback: str = ""  # the title when the tree has no text at all (the file name)
    tree_fields: dict = field(default_factory=dict)  # other Tree columns (Weft JSON)


# --- checks shared by the parsers -------------------------------------------------------


def json_kind(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words (not Python's "int", "NoneType")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    return {str: "a string", dict: "an object", list: "a list"}.get(type(value), "a value")


def as_str(value: Any, what: str, *, allow_none: bool = False) -> str:
    if value is None and allow_none:
        return ""
    if not isinstance(value, str):
        raise ImportRefused(f"{what} must be a string, not {json_kind(value)}.")
    return value


def as_dict(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise ImportRefused(f"{what} must be an object, not {json_kind(value)}.")
    return value


def as_key(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ImportRefused(f"{what} must be a string or number.")
    return str(value)


def as_when(value: Any) -> datetime | None:
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


def single_root(records: list[Rec]) -> list[Rec]:
    """Weft trees have one root; several roots go under a new empty one."""
    roots = [r for r in records if r.parent is None]
    if len(roots) == 1:
        return records
    top = Rec(key="\0root", parent=None, text="")
    for r in roots:
        r.parent = top.key
    return [top, *records]


def check_size(n: int) -> None:
    if n > MAX_IMPORT_NODES:
        raise ImportRefused(f"The file has {n:,} nodes; the limit is {MAX_IMPORT_NODES:,}.")


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
        # The first text in the tree's order (ids are taken in preorder), for a title.
        self.first_text: tuple[int, str] | None = None
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
        check_size(len(self.parent_of))
        if parent_id is None and self.first_root is None:
            self.first_root = node_id
        if rec.text.strip() and (self.first_text is None or node_id < self.first_text[0]):
            self.first_text = (node_id, rec.text[:400])
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
        tree.title = title_for(parsed, self.first_text[1] if self.first_text else "")
        tree.settings = parsed.settings
        tree.extra = parsed.extra
        current = self.ids.get(parsed.current) if parsed.current else None
        tree.current_id = current if current in self.parent_of else self.first_root
        for name, value in parsed.tree_fields.items():
            setattr(tree, name, value)
        tree.save(update_fields=["title", "settings", "extra", "current", *parsed.tree_fields])
        return tree


def title_for(parsed: Parsed, first_text: str) -> str:
    """The file's own title, else the first words of its first text (the root's, or
    the first below an empty root), else the file name: not seven rows named after
    near-identical file names."""
    if parsed.title.strip():
        return parsed.title.strip()[:200]
    if first_text.strip():
        words = " ".join(first_text.split())
        return (words[:60] + "…") if len(words) > 60 else words
    return parsed.fallback[:200] or "Imported tree"


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
