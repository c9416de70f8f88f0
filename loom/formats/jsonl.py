"""Weft's JSONL export: one node record per line, each written as read; and the
sniffing that knows it under another file name."""

from __future__ import annotations

import io
from typing import IO

from loom.formats.jsonstream import Events, JSONRefused
from loom.formats.records import ImportRefused, Parsed, TreeWriter
from loom.formats.weft import weft_record

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
        writer.add(weft_record(number - 1, node))
    return Parsed(fmt="jsonl", title="", records=[], fallback=title)
