"""Reading an uploaded prompt file: JSONL (a "prompt" field, every other field kept
as metadata), CSV (a "prompt" column, the other columns metadata) or plain text (one
prompt per line). The first malformed line stops the read with an error naming it;
nothing is stored until the whole file has been read (the caller creates the batch
in one transaction)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

MAX_PROMPTS = 10_000
MAX_DEPTH = 32  # levels of objects and lists in a line's metadata (the line itself is one)
FORMATS = ("auto", "jsonl", "csv", "text")


@dataclass
class Prompt:
    line: int
    prompt: str
    metadata: dict[str, Any] = field(default_factory=dict)


class UploadError(ValueError):
    def __init__(self, message: str, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line else message)


def detect(filename: str, chosen: str) -> str:
    if chosen in ("jsonl", "csv", "text"):
        return chosen
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    return "text"


def parse(data: bytes, fmt: str) -> list[Prompt]:
    """The prompts of an uploaded file, or UploadError naming the first bad line."""
    text = _decode(data)
    reader = {"jsonl": _jsonl, "csv": _csv, "text": _text}[fmt]
    prompts: list[Prompt] = []
    for prompt in reader(text):
        if len(prompts) == MAX_PROMPTS:
            raise UploadError(f"more than {MAX_PROMPTS:,} prompts (the most one batch takes)",
                              prompt.line)  # fmt: skip
        prompts.append(prompt)
    if not prompts:
        raise UploadError("the file holds no prompts")
    return prompts


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UploadError("not UTF-8 text (save the file as UTF-8)", line) from None
    return text.removeprefix("\ufeff")


def _storable(value: Any, line: int, what: str) -> None:
    """Postgres text and jsonb hold neither NUL nor a lone surrogate (JSON can
    escape both): refuse them here, naming the line, rather than fail the INSERT.
    Walked with a stack, and no deeper than MAX_DEPTH: json.loads builds a line
    nested a thousand levels deep, which would stop a recursive walk (and every
    later reader of the metadata) with a RecursionError."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise UploadError(f"{what} contains a NUL character", line)
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise UploadError(
                    f"{what} contains an unpaired surrogate (\\ud8xx)", line
                ) from None
        elif isinstance(item, dict | list):
            if depth == MAX_DEPTH:
                raise UploadError(f"{what} nests deeper than {MAX_DEPTH} levels", line)
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                stack.extend((inner, depth + 1) for inner in item.values())
            else:
                stack.extend((inner, depth + 1) for inner in item)


def _jsonl(text: str):
    for number, raw in _lines(text):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise UploadError(f"not JSON ({exc.msg})", number) from None
        except RecursionError:
            raise UploadError(f"the line nests deeper than {MAX_DEPTH} levels", number) from None
        except ValueError as exc:  # NaN / Infinity, or an integer of thousands of digits
            raise UploadError(f"not JSON ({exc})", number) from None
        if not isinstance(row, dict):
            raise UploadError(f"not a JSON object (a {type(row).__name__})", number)
        if "prompt" not in row:
            raise UploadError('no "prompt" field', number)
        prompt = row.pop("prompt")
        if not isinstance(prompt, str):
            raise UploadError(f'"prompt" must be a string, not {_json_type(prompt)}', number)
        _storable(prompt, number, "the prompt")
        _storable(row, number, "a metadata field")
        yield Prompt(number, prompt, row)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _lines(text: str):
    """(number, line) split on \n only: str.splitlines() would also split inside a
    JSON string holding U+2028 or a form feed."""
    for number, raw in enumerate(text.split("\n"), start=1):
        yield number, raw.removesuffix("\r")


def _json_type(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", list: "an array",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)  # fmt: skip


def _csv(text: str):
    sample = text[:4096]
    delimiter = "\t" if sample.count("\t") > sample.count(",") else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise UploadError(f"not CSV ({exc})", 1) from None
    if not header:
        return
    names = [name.strip() for name in header]
    if "prompt" not in names:
        shown = ", ".join(repr(n) for n in names[:8])
        raise UploadError(f'no "prompt" column in the header (it has {shown})', 1)
    if len(set(names)) != len(names):
        raise UploadError("the header names a column twice", 1)
    for name in names:
        _storable(name, 1, "the header")
    column = names.index("prompt")
    start = 1
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise UploadError(f"not CSV ({exc})", start) from None
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(names):
            raise UploadError(f"{len(row)} fields where the header has {len(names)}", start)
        metadata = {name: cell for name, cell in zip(names, row, strict=True) if name != "prompt"}
        _storable(row[column], start, "the prompt")
        _storable(metadata, start, "a field")
        yield Prompt(start, row[column], metadata)


def _text(text: str):
    for number, raw in _lines(text):
        if not raw.strip():
            continue
        _storable(raw, number, "the prompt")
        yield Prompt(number, raw)
