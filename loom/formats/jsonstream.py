"""Reading import files incrementally with ijson: no recursion (a pyloom file
3,000 nodes deep nests 6,000 JSON levels; json.loads stops near 1,000) and no
whole-document object graph (a 64 MB file was over 1 GB of Python objects).

Every event goes through Events, the one place that refuses what Postgres
could not store: a NUL character in any string or key (text and jsonb cannot
hold U+0000), a float that overflows, an integer too long to be a number
anyone meant — and a number the parser itself cannot build (past Python's
4,300-digit limit, or an exponent Decimal cannot hold). A refused number names
its field (the key it is under, or its list's). yajl itself refuses NaN and
Infinity (said as such: Python's own json would have read them)."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterator
from decimal import Decimal
from typing import IO, Any

import ijson
from ijson.backends import python as pure_python

MAX_INT_DIGITS = 40  # past 2**128: no field of any format means that
# Decimal refuses an exponent of 19 digits or more (its limit is 999999999999999999).
EXPONENT_DIGITS = 19
SCAN_BYTES = 256 * 1024


class JSONRefused(ValueError):
    """The bytes are not JSON we can store; the message says why."""


class Events:
    """ijson's basic events (no prefixes: a prefix string per event would cost
    O(depth) each, O(depth²) over a deep file), checked and normalised."""

    def __init__(self, source: IO[bytes]) -> None:
        # ijson's C parser cannot report a number it fails to build: past Python's
        # digit limit (or Decimal's exponent limit) the error escapes later, from
        # whatever runs next, as "SystemError: … returned a result with an exception
        # set". A file holding such a run of digits (in a number, or harmlessly in a
        # string) is read by ijson's pure-Python parser, which refuses the number
        # itself, where its field is known; every other file by the C parser.
        parser = pure_python if unbuildable_numbers(source) else ijson
        self._it = parser.basic_parse(source)
        self._ahead: tuple[str, Any] | None = None
        # The key each open container's next value is under (a list's items: the
        # list's own key), to name the field of a number that cannot be read.
        self._names: list[str | None] = [None]

    def __iter__(self) -> Events:
        return self

    def __next__(self) -> tuple[str, Any]:
        if self._ahead is not None:
            event, self._ahead = self._ahead, None
            return event
        try:
            event, value = next(self._it)
        except _PARSE_ERRORS as exc:
            raise self._refusal(exc) from None
        if event == "map_key":
            self._names[-1] = value
        elif event == "start_map":
            self._names.append(None)
        elif event == "start_array":
            self._names.append(self._names[-1])
        elif event in ("end_map", "end_array"):
            self._names.pop()
        if event in ("string", "map_key"):
            if "\x00" in value:
                raise JSONRefused(
                    "The file holds a NUL character (\\u0000) in "
                    f"{'a key' if event == 'map_key' else 'a string'}: "
                    "Weft cannot store it. Remove it and import again."
                )
        elif event == "number":
            value = _number(value, self._names[-1])
        return event, value

    def _refusal(self, exc: Exception) -> JSONRefused:
        if isinstance(exc, UnicodeDecodeError):
            return JSONRefused("The file is not valid JSON: it is not UTF-8 text.")
        if isinstance(exc, ijson.JSONError) and not isinstance(exc, ijson.IncompleteJSONError):
            return JSONRefused(_symbol(exc, self._names[-1]))  # the pure-Python parser's
        # yajl's messages; it also reports bad bytes as a ValueError holding them.
        return JSONRefused(_describe(exc))

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

    def keys(self, what: str) -> Iterator[str]:
        """The keys of the object that comes next, one at a time: after each, the
        caller reads its value (value()) or passes it by (skip()), so a big object is
        never built whole."""
        self.expect("start_map", what)
        for event, key in self:
            if event == "end_map":
                return
            yield key

    def skip(self, first: tuple[str, Any] | None = None) -> str:
        """Read past the next value without building it; returns its event type.
        What is inside is never stored, so it is not checked: its events come
        straight from the parser (a few times faster over a big unknown value),
        only the names kept, for a number the parser itself cannot build."""
        event, _ = first if first is not None else next(self)
        if event not in ("start_map", "start_array"):
            return event
        depth, names = 1, self._names
        try:
            for e, value in self._it:
                if e == "map_key":
                    names[-1] = value
                elif e == "start_map" or e == "start_array":
                    names.append(None if e == "start_map" else names[-1])
                    depth += 1
                elif e == "end_map" or e == "end_array":
                    names.pop()
                    depth -= 1
                    if not depth:
                        break
        except _PARSE_ERRORS as exc:
            raise self._refusal(exc) from None
        if depth:
            raise JSONRefused(_describe(ijson.IncompleteJSONError("premature EOF")))
        return event

    def end(self) -> None:
        """Check that nothing but whitespace follows the document."""
        for _ in self:
            raise JSONRefused(MORE_THAN_ONE)


# What the parsers raise for bytes that are not JSON (UnicodeDecodeError is a
# ValueError; IncompleteJSONError and the pure-Python parser's UnexpectedSymbol are
# JSONErrors; yajl fails inside int() past the digit limit with a ValueError).
_PARSE_ERRORS = (ijson.JSONError, ValueError, OverflowError)

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


def _number(value: Any, name: str | None) -> int | float:
    if isinstance(value, Decimal):
        as_float = float(value)
        if math.isinf(as_float):
            raise JSONRefused(_too_large(name))
        return as_float
    if isinstance(value, int) and len(str(abs(value))) > MAX_INT_DIGITS:
        raise JSONRefused(
            f"The file holds an integer of {len(str(abs(value))):,} digits{_in(name)}; "
            f"the limit is {MAX_INT_DIGITS}."
        )
    return value


def _in(name: str | None) -> str:
    return "" if name is None else f" in {name[:100]!r}"


def _too_large(name: str | None) -> str:
    return f"The file holds a number too large to store{_in(name)}."


def _symbol(exc: Exception, name: str | None) -> str:
    """The pure-Python parser's refusal of a token: a number it could not build
    (thousands of digits, or an exponent past Decimal's), else bad JSON."""
    found = re.match(r"Unexpected symbol '(-?[0-9][^']*)", str(exc))
    if found is None:
        return _describe(exc)
    if found[1].lstrip("-").isdigit():
        return (
            f"The file holds an integer too long to read{_in(name)} (thousands of digits); "
            f"the limit is {MAX_INT_DIGITS} digits."
        )
    return f"The file holds a number with an exponent too long to read{_in(name)}."


# Every digit as "0", every e or E as "e", signs as themselves, the rest as a space: a
# long run of digits (or an exponent's) is then one bytes.find away, at C speed.
_SHAPES = bytes(
    48 if 48 <= b <= 57 else 101 if b in b"eE" else b if b in b"+-" else 32 for b in range(256)
)


def unbuildable_numbers(source: IO[bytes]) -> bool:
    """Whether the file holds a run of digits longer than int() builds from text
    (sys.get_int_max_str_digits(), 4,300 by default) or an exponent longer than
    Decimal's; the source is read through and left where it was."""
    limit = sys.get_int_max_str_digits()
    needles = [b"e" + b"0" * EXPONENT_DIGITS, b"e+" + b"0" * EXPONENT_DIGITS,
               b"e-" + b"0" * EXPONENT_DIGITS]  # fmt: skip
    if limit:
        needles.append(b"0" * (limit + 1))
    keep = max(len(n) for n in needles) - 1  # a run across two reads is found whole
    at = source.tell()
    carry = b""
    try:
        while chunk := source.read(SCAN_BYTES):
            shapes = carry + chunk.translate(_SHAPES)
            if any(needle in shapes for needle in needles):
                return True
            carry = shapes[-keep:]
    finally:
        source.seek(at)
    return False


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")


MORE_THAN_ONE = (
    "The file holds more than one JSON document (or text after it): Weft reads one "
    "document, or its own JSONL export of one node per line."
)
# yajl's messages, as sentences a person can act on (the parser's wording means
# little to someone who exported a file from another loom).
_SENTENCES = (
    ("premature EOF", "The file ends early: it looks truncated."),
    ("trailing garbage", MORE_THAN_ONE),
    ("overflow", "The file holds a number too large to store."),
    ("invalid bytes in UTF8", "The file is not valid JSON: it is not UTF-8 text."),
    ("comment", "The file is not valid JSON: it holds a comment, which JSON does not allow."),
    ("malformed number", "The file is not valid JSON: it holds a number written wrongly."),
    (
        "invalid string",
        "The file is not valid JSON: it holds a word JSON does not know "
        "(only true, false and null may stand unquoted).",
    ),
    (
        "invalid char",
        "The file is not valid JSON: it holds a character JSON does not allow there "
        "(single quotes, a stray letter or symbol).",
    ),
    (
        "invalid object key",
        "The file is not valid JSON: an object has a key without double quotes, "
        "or a comma before its closing brace.",
    ),
    ("separated by a colon", "The file is not valid JSON: a key is not followed by a colon."),
    ("inside map", "The file is not valid JSON: an object is missing a comma or a closing brace."),
    (
        "array element",
        "The file is not valid JSON: a list is missing a comma or a closing bracket.",
    ),
    ("unallowed token", "The file is not valid JSON: a comma or bracket is out of place."),
    ("'\\'", "The file is not valid JSON: a string holds a backslash JSON does not allow."),
    ("'\\u'", "The file is not valid JSON: a string holds a broken \\u escape."),
)


NON_FINITE = (
    "The file is not valid JSON: it holds Infinity or NaN, which JSON has no way to "
    "write (the program that wrote the file let a number overflow or go undefined). "
    "Replace each with null or a number, and import again."
)
_NON_FINITE = re.compile(r"-?(?:Infinity|NaN)\b")


def _non_finite(exc: Exception) -> bool:
    """Whether yajl stopped at Infinity or NaN: its message shows the text around the
    error and, on the line below, a caret one character past where it stopped."""
    lines = str(exc).splitlines()
    for text, pointer in zip(lines[1:], lines[2:], strict=False):
        at = pointer.find("^")
        if at > 0 and _NON_FINITE.match(text, at - 1):
            return True
    return False


def _describe(exc: Exception) -> str:
    if _non_finite(exc):
        return NON_FINITE
    line = _first_line(exc)
    for words, sentence in _SENTENCES:
        if words in line:
            return sentence
    return "The file is not valid JSON."
