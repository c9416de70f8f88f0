"""What every importer produces and how it is stored: the flat record of a
node, the checks the parsers share, Skeleton (the first of the flat formats' two
reads) and TreeWriter, which writes records in batches as a file is read
(loom.formats.importers)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
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
    names: dict[type, str] = {str: "a string", dict: "an object", list: "a list"}
    return names.get(type(value), "a value")


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


class Skeleton:
    """The first read of a flat file (loomsidian, exoloom, MiniLoom), where a node
    may come before its parent: each node's key, parent and place in its parent's
    list of children, kept compact — each key once, the rest numbers in arrays, a
    few dozen bytes a node besides its key. check() refuses a parent not in the file,
    no root or a cycle, and gives each node its position; the second read of the
    file then writes each node as it comes (TreeWriter), never holding them all."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}  # key -> its number here
        self.keys: list[str] = []
        self.parent = array("q")  # the parent's number; -1: none (a root)
        self.arrival = array("q")  # numbers of the nodes, in the order they came
        self.is_node = bytearray()  # 0: only named (as a parent or a child)
        self.listed_by = array("q")  # the node whose list of children names it, or -1
        self.rank = array("q")  # its place in that list
        self.position = array("q")
        self.roots: list[int] = []
        self.children: dict[int, list[int]] = {}
        self.current: int | None = None  # the node to open the tree at (the file says)

    def number(self, key: str) -> int:
        n = self.index.get(key)
        if n is None:
            n = self.index[key] = len(self.keys)
            self.keys.append(key)
            self.parent.append(-1)
            self.is_node.append(0)
            self.listed_by.append(-1)
            self.rank.append(-1)
        return n

    def add(self, key: str, parent: str | None, children: list[str] | None = None) -> None:
        n = self.number(key)
        if self.is_node[n]:
            raise ImportRefused(f"Node id {key!r} appears twice.")
        self.is_node[n] = 1
        self.arrival.append(n)
        check_size(len(self.arrival))
        self.parent[n] = -1 if parent is None else self.number(parent)
        for rank, child in enumerate(children or ()):
            c = self.number(child)
            self.listed_by[c], self.rank[c] = n, rank

    def check(self) -> None:
        """Every parent in the file, a root, no cycle; then each node's position: its
        place in its parent's list of children where that list names it, else after
        them, in file order."""
        kids = self.children
        for n in self.arrival:
            p = self.parent[n]
            if p < 0:
                self.roots.append(n)
            elif not self.is_node[p]:
                raise ImportRefused(
                    f"Node {self.keys[n]!r} names a parent {self.keys[p]!r} that is not in the file."
                )
            else:
                kids.setdefault(p, []).append(n)
        if not self.roots:
            raise ImportRefused("The file has no root node (every node has a parent).")
        self.position = array("q", bytes(8 * len(self.keys)))
        listed = self.listed_by
        for p, ks in kids.items():
            ks.sort(key=lambda k: self.rank[k] if listed[k] == p else len(self.keys))
        for ks in [self.roots, *kids.values()]:
            for place, k in enumerate(ks):
                self.position[k] = place
        reached = sum(1 for _ in self.preorder())
        if reached != len(self.arrival):
            raise ImportRefused(
                f"{len(self.arrival) - reached} node(s) are not reachable from a root: "
                "their parents form a cycle."
            )

    def preorder(self) -> Iterator[int]:
        """The nodes parents first, siblings in position order (iterative: any depth)."""
        stack = list(reversed(self.roots))
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(self.children.get(n, ())))

    def find(self, key: Any) -> int | None:
        """The number of the node with this key (a string or a number), if it is one."""
        number = self.index.get(str(key)) if isinstance(key, str | int) else None
        return number if number is not None and self.is_node[number] else None

    def forget(self) -> None:
        """Drop what only the first read needs (keys, lists of children): the second
        read (PlannedWriter) takes its nodes in the same order, by number."""
        self.index, self.keys, self.children = {}, [], {}
        self.is_node, self.listed_by, self.rank = bytearray(), array("q"), array("q")


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
        self.owner_name = owner.get_username()
        self.ids: dict[str, int] = {}
        self.parent_of: dict[int, int | None] = {}
        self.next_position: dict[int | None, int] = {}
        self.batch: list[Node] = []
        self.free: list[int] = []
        self.first_root: int | None = None
        # The first text in the tree's order (ids are taken in preorder), for a title.
        self.first_text: tuple[int, str] | None = None
        self.now = timezone.now()

    def new_id(self) -> int:
        if not self.free:
            self.free = _allocate_ids(self.ID_BLOCK)[::-1]
        return self.free.pop()

    def id_for(self, key: str) -> int:
        node_id = self.ids.get(key)
        if node_id is None:
            node_id = self.ids[key] = self.new_id()
        return node_id

    def place(self, rec: Rec) -> tuple[int, int | None, int]:
        """The record's (id, parent id, position), kept for the checks at the end."""
        node_id = self.id_for(rec.key)
        if node_id in self.parent_of:
            raise ImportRefused(f"Node id {rec.key!r} appears twice.")
        parent_id = None if rec.parent is None else self.id_for(rec.parent)
        self.parent_of[node_id] = parent_id
        check_size(len(self.parent_of))
        position = rec.fields.get("position")
        if position is None:
            position = self.next_position.get(parent_id, 0)
        self.next_position[parent_id] = position + 1
        return node_id, parent_id, position

    def add(self, rec: Rec) -> None:
        node_id, parent_id, position = self.place(rec)
        if parent_id is None and self.first_root is None:
            self.first_root = node_id
        if rec.text.strip() and (self.first_text is None or node_id < self.first_text[0]):
            self.first_text = (node_id, rec.text[:400])
        fields = {k: v for k, v in rec.fields.items() if k not in ("position", "written_by")}
        # A file's writer is kept only when it names the importing user: a file could
        # name anyone, and nobody's text is put in another user's name.
        if rec.fields.get("written_by") == self.owner_name:
            fields["written_by_id"] = self.tree.owner_id
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
        """What Skeleton.check does for the flat formats: every parent is in
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
        tree.current_id = self.current(parsed) or self.first_root
        for name, value in parsed.tree_fields.items():
            setattr(tree, name, value)
        tree.save(update_fields=["title", "settings", "extra", "current", *parsed.tree_fields])
        return tree

    def current(self, parsed: Parsed) -> int | None:
        current = self.ids.get(parsed.current) if parsed.current else None
        return current if current in self.parent_of else None


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


class PlannedWriter(TreeWriter):
    """Writes the second read of a flat file, whose first read made `skeleton`: the
    k-th node read is the skeleton's k-th, so its id, parent and position come from
    the skeleton's arrays, and no key is looked up or kept. When the file has
    several roots, an empty node goes over them (Weft trees have one root)."""

    def __init__(self, owner, skeleton: Skeleton) -> None:
        super().__init__(owner)
        self.skeleton = skeleton
        self.node_ids = array("q", bytes(8 * len(skeleton.parent)))  # 0: none yet
        self.written = 0
        self.top: int | None = None
        if len(skeleton.roots) > 1:
            self.top = self.first_root = self.new_id()
            self.batch.append(Node(id=self.top, tree=self.tree, parent_id=None, position=0,
                                   text="", created_at=self.now))  # fmt: skip

    @property
    def upcoming(self) -> int:
        """The skeleton's number of the node the next add() writes."""
        return self.skeleton.arrival[self.written]

    def _id(self, number: int) -> int:
        if not self.node_ids[number]:
            self.node_ids[number] = self.new_id()
        return self.node_ids[number]

    def place(self, rec: Rec) -> tuple[int, int | None, int]:
        sk = self.skeleton
        number = self.upcoming
        self.written += 1
        parent = sk.parent[number]
        return self._id(number), self._id(parent) if parent >= 0 else self.top, sk.position[number]

    def current(self, parsed: Parsed) -> int | None:
        number = self.skeleton.current
        if number is None:
            return None
        return self.node_ids[number] or None


def _allocate_ids(n: int) -> list[int]:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT nextval(pg_get_serial_sequence('{NODE_TABLE}', 'id')) "  # noqa: S608
            "FROM generate_series(1, %s)",
            [n],
        )
        return [row[0] for row in cur.fetchall()]
