"""Reading import files incrementally with ijson: no recursion (a pyloom file
3,000 nodes deep nests 6,000 JSON levels; json.loads stops near 1,000) and no
whole-document object graph (a 64 MB file was over 1 GB of Python objects).

Every event goes through Events, the one place that refuses what Postgres
could not store: a NUL character in any string or key (text and jsonb cannot
hold U+0000), a float that overflows, an integer too long to be a number
anyone meant. yajl itself refuses NaN and Infinity."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import IO, Any

import ijson

MAX_INT_DIGITS = 40  # past 2**128: no field of any format means that


class JSONRefused(ValueError):
    """The bytes are not JSON we can store; the message says why."""


class Events:
    """ijson's basic events (no prefixes: a prefix string per event would cost
    O(depth) each, O(depth²) over a deep file), checked and normalised."""

    def __init__(self, source: IO[bytes]) -> None:
        self._it = ijson.basic_parse(source)
        self._ahead: tuple[str, Any] | None = None

    def __iter__(self) -> Events:
        return self

    def __next__(self) -> tuple[str, Any]:
        if self._ahead is not None:
            event, self._ahead = self._ahead, None
            return event
        try:
            event, value = next(self._it)
        except ijson.IncompleteJSONError as exc:
            raise JSONRefused(_describe(exc)) from None
        except (ValueError, OverflowError, UnicodeDecodeError) as exc:
            # ijson's yajl backend fails inside int() past Python's digit limit.
            raise JSONRefused(f"The file is not valid JSON: {_first_line(exc)}.") from None
        if event in ("string", "map_key"):
            if "\x00" in value:
                raise JSONRefused(
                    "The file holds a NUL character (\\u0000) in "
                    f"{'a key' if event == 'map_key' else 'a string'}: "
                    "Weft cannot store it. Remove it and import again."
                )
        elif event == "number":
            value = _number(value)
        return event, value

    def peek(self) -> tuple[str, Any]:
        if self._ahead is None:
            self._ahead = next(self)
        return self._ahead

    def expect(self, wanted: str, what: str) -> None:
        event, _ = next(self)
        if event != wanted:
            raise JSONRefused(f"{what} must be {_NAMES[wanted]}, not {_NAMES.get(event, event)}.")

    def value(self, first: tuple[str, Any] | None = None) -> Any:
        """Build the next whole value (iteratively: any depth)."""
        event, value = first if first is not None else next(self)
        if event not in ("start_map", "start_array"):
            return value
        root: Any = {} if event == "start_map" else []
        stack: list[Any] = [root]
        key: list[str | None] = [None]
        while stack:
            event, value = next(self)
            top = stack[-1]
            if event == "map_key":
                key[-1] = value
                continue
            if event in ("end_map", "end_array"):
                stack.pop()
                key.pop()
                continue
            if event in ("start_map", "start_array"):
                item: Any = {} if event == "start_map" else []
            else:
                item = value
            if isinstance(top, dict):
                top[key[-1]] = item
            else:
                top.append(item)
            if event in ("start_map", "start_array"):
                stack.append(item)
                key.append(None)
        return root

    def skip(self, first: tuple[str, Any] | None = None) -> str:
        """Read past the next value without building it; returns its event type."""
        event, _ = first if first is not None else next(self)
        depth = 1 if event in ("start_map", "start_array") else 0
        while depth:
            e, _ = next(self)
            if e in ("start_map", "start_array"):
                depth += 1
            elif e in ("end_map", "end_array"):
                depth -= 1
        return event

    def end(self) -> None:
        """Check that nothing but whitespace follows the document."""
        for _ in self:
            raise JSONRefused("The file holds more than one JSON document.")


_NAMES = {
    "start_map": "an object",
    "start_array": "a list",
    "string": "a string",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
    "end_map": "the end of an object",
    "end_array": "the end of a list",
    "map_key": "a key",
}


def _number(value: Any) -> int | float:
    if isinstance(value, Decimal):
        as_float = float(value)
        if math.isinf(as_float):
            raise JSONRefused("The file holds a number too large to store.")
        return as_float
    if isinstance(value, int) and len(str(abs(value))) > MAX_INT_DIGITS:
        raise JSONRefused(
            f"The file holds an integer of {len(str(abs(value))):,} digits; "
            f"the limit is {MAX_INT_DIGITS}."
        )
    return value


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")


def _describe(exc: Exception) -> str:
    line = _first_line(exc)
    if "premature EOF" in line:
        return "The file ends early: it looks truncated."
    if "trailing garbage" in line:
        return "The file holds more than one JSON document (or text after it)."
    if "integer overflow" in line or "overflow" in line:
        return "The file holds a number too large to store."
    return f"The file is not valid JSON: {line}."
