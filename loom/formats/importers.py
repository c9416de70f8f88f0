"""Import a tree file: detect the format, turn it into flat records in
parent-before-child order (iteratively: no recursion limit on deep trees),
check everything, then write it in one transaction. Any problem raises
ImportRefused naming what is wrong, and nothing is created.

Files are read with ijson (loom.formats.jsonstream), never json.loads: Weft JSON
node by node, JSONL line by line, pyloom's nesting event by event with an
explicit stack, the flat formats (loomsidian, exoloom, MiniLoom) node by node in
two reads (their skeleton, then the nodes). The format is known from the
top-level keys alone (read_head), whose values are passed by without being
built: a file of something else costs its read, not its size in objects.

This module detects and dispatches; each format's reader is its own module
(weft, jsonl, pyloom, loomsidian, exoloom, miniloom), sharing loom.formats.records."""

from __future__ import annotations

import io
import os
from typing import IO, Any

from django.db import transaction

from loom.formats.exoloom import import_exoloom
from loom.formats.exporters import WEFT_FORMAT
from loom.formats.jsonl import is_weft_jsonl, parse_jsonl
from loom.formats.jsonstream import Events, JSONRefused
from loom.formats.loomsidian import import_loomsidian
from loom.formats.miniloom import import_miniloom
from loom.formats.pyloom import parse_pyloom
from loom.formats.records import (
    MAX_IMPORT_BYTES,
    MAX_IMPORT_NODES,
    ImportRefused,
    TreeWriter,
)
from loom.formats.weft import parse_weft
from loom.models import Tree

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
    if filename.lower().endswith(TEXT_SUFFIXES):
        # A text file is a one-node tree, unless it is a tree file saved under a
        # .txt name (a Weft JSONL export, a JSON document): tried first, in a savepoint.
        if _starts_like_json(source):
            try:
                with transaction.atomic():
                    return _parse_tree(source, filename, base, owner)
            except ImportRefused:
                source.seek(0)
        return [import_text(owner, source, base)]
    return _parse_tree(source, filename, base, owner)


def _starts_like_json(source: IO[bytes]) -> bool:
    head = source.read(4096).lstrip()
    source.seek(0)
    return head[:1] in (b"{", b"[")


def _parse_tree(source: IO[bytes], filename: str, base: str, owner) -> list[Tree]:
    try:
        if filename.lower().endswith((".jsonl", ".ndjson")) or is_weft_jsonl(source):
            writer = TreeWriter(owner)
            return [writer.finish(parse_jsonl(source, base, writer), one_root=True)]
        head = read_head(Events(source))
        fmt = detect(head)
        source.seek(0)
        if fmt in ("weft", "pyloom"):
            events = Events(source)
            writer = TreeWriter(owner)
            if fmt == "weft":
                return [writer.finish(parse_weft(events, writer), one_root=True)]
            bare = not _is_map(head.get("root"))
            return [writer.finish(parse_pyloom(events, base, writer, bare=bare))]
        if fmt == "loomsidian":
            return import_loomsidian(source, owner)
        if fmt == "exoloom":
            return [import_exoloom(source, base, owner)]
        return [import_miniloom(source, base, owner)]
    except JSONRefused as exc:
        raise ImportRefused(str(exc)) from None


# A plain text file is one node: the root of a new tree.
TEXT_SUFFIXES = (".txt", ".text", ".md")


def import_text(owner, source: IO[bytes], name: str) -> Tree:
    raw = source.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRefused(
            f"The text file is not UTF-8 (byte {exc.start:,} cannot be read)."
        ) from None
    if "\x00" in text:
        raise ImportRefused("The text file holds a NUL character, which a tree cannot store.")
    text = text.replace("\r\n", "\n")
    return Tree.objects.create_from_prompt(owner, text, title="" if text.strip() else name)


class Glance:
    """A top-level value passed by while detecting the format, never built: what it
    is, and which of the keys detection asks about it holds."""

    def __init__(self, event: str, keys: frozenset[str] = frozenset(), notes: int = 0) -> None:
        self.is_map = event == "start_map"
        self.keys = keys
        self.notes = notes  # loomsidian's state: its entries, when each is a note (else 0)


# What detection reads of each top-level key; any other key's value is skipped.
_SCALARS = {"format", "loomType"}  # their value (when it is not an object or a list)
_LOOKED_INTO = {"tree": {"rootNodeId"}}  # which of these keys the object holds


def read_head(events: Events) -> dict[str, Any]:
    """The top-level object's keys, each with its value when detection needs it (a
    short scalar) or a Glance. Weft's and pyloom's own files say what they are in
    their first key: the read stops there, so a big file is not read through twice."""
    if events.peek()[0] != "start_map":
        events.skip()
        events.end()
        return {}
    head: dict[str, Any] = {}
    for key in events.keys("The file"):
        if not head and key == "root" and events.peek()[0] == "start_map":
            return {"root": Glance("start_map")}  # pyloom: its root is read once, by its parser
        head[key] = _glance(events, key)
        if len(head) == 1 and detect_early(head):
            return head
    events.end()
    return head


def _glance(events: Events, key: str) -> Any:
    event, value = events.peek()
    if key in _SCALARS and event not in ("start_map", "start_array"):
        return events.value()
    if event != "start_map" or key not in (*_LOOKED_INTO, "state"):
        return Glance(events.skip())
    if key == "state":  # loomsidian: every entry an object with "nodes"
        notes = 0
        for _ in events.keys("'state'"):
            if events.peek()[0] != "start_map":
                events.skip()
                notes = -1
                continue
            found = False
            for inner in events.keys("a note"):
                found = found or inner == "nodes"
                events.skip()
            notes = notes + 1 if notes >= 0 and found else -1
        return Glance("start_map", notes=max(notes, 0))
    wanted, looked = _LOOKED_INTO[key], set()
    for inner in events.keys(f"'{key}'"):
        if inner in wanted:
            looked.add(inner)
        events.skip()
    return Glance("start_map", frozenset(looked))


def detect_early(head: dict[str, Any]) -> bool:
    return head.get("format") == WEFT_FORMAT or _is_map(head.get("root"))


def _is_map(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, Glance) and value.is_map)


def detect(doc: Any) -> str:
    if isinstance(doc, dict):
        if doc.get("format") == WEFT_FORMAT:
            return "weft"
        tree = doc.get("tree")
        if doc.get("loomType") == "Exoloom" or (
            isinstance(tree, Glance) and "rootNodeId" in tree.keys
        ):
            return "exoloom"
        if _is_map(doc.get("loomTree")):
            return "miniloom"
        state = doc.get("state")
        if isinstance(state, Glance) and state.notes:
            return "loomsidian"
        if _is_map(doc.get("root")) or ("text" in doc and "children" in doc):
            return "pyloom"
    raise ImportRefused(
        "Unrecognised file: expected Weft JSON, pyloom JSON (a 'root' node), loomsidian "
        "data.json (a 'state' object), an exoloom export ('loomType': 'Exoloom') or a "
        "MiniLoom file (a 'loomTree' object)."
    )
