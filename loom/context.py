"""Memory and author's note: what is put around a path before it is sent.

`assemble` is pure (the tests call it with a made-up tokenizer): the memory first (on
lines of its own), then the path, with the author's note put `depth` newlines or
`depth` tokens before the path's end. Counting tokens needs the model's tokenizer:
`backend_cut` asks the backend, `prompt_for` puts both together for a tree and a model.
What a generation used is recorded with it (`Context.record`), so each node says exactly
what was sent and a re-run can send it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from completions.client import BackendClient
from completions.errors import BackendError

NEWLINES, TOKENS = "newlines", "tokens"
MAX_DEPTH = 10_000
# `cut(text, n)`: the character offset n tokens before the end of `text`.
Cut = Callable[[str, int], int]


@dataclass(frozen=True)
class Context:
    memory: str = ""
    note: str = ""
    depth: int = 3
    unit: str = NEWLINES

    @classmethod
    def of(cls, tree: Any) -> Context:
        return cls(tree.memory or "", tree.note or "", int(tree.note_depth), tree.note_unit)

    @classmethod
    def from_record(cls, record: dict | None) -> Context:
        record = record if isinstance(record, dict) else {}
        unit = TOKENS if record.get("unit") == TOKENS else NEWLINES
        depth = record.get("depth")
        return cls(
            str(record.get("memory") or ""),
            str(record.get("note") or ""),
            depth if isinstance(depth, int) and 0 <= depth <= MAX_DEPTH else 3,
            unit,
        )

    @property
    def empty(self) -> bool:
        return not self.memory and not self.note

    def record(self) -> dict[str, Any] | None:
        """What a generation stores of it (None when there was nothing to add)."""
        if self.empty:
            return None
        return {"memory": self.memory, "note": self.note, "depth": self.depth, "unit": self.unit}


def newline_offset(text: str, depth: int) -> int:
    """Just after the `depth`-th newline counted from the end (0: the very end); the
    start when the text has fewer."""
    at = len(text)
    for _ in range(depth):
        found = text.rfind("\n", 0, at)
        if found < 0:
            return 0
        at = found
    return at + 1 if depth else at


def assemble(path: str, context: Context, *, cut: Cut | None = None) -> str:
    """The prompt sent for `path`: the memory on lines of its own before it, and the
    note inserted before its end — `depth` newlines before it as a line of its own
    (0: after the text), or exactly `depth` tokens before it as written (`cut` counts
    them; without one the note goes at the end)."""
    text = path
    if context.note:
        if context.unit == TOKENS:
            at = cut(path, context.depth) if cut is not None and context.depth else len(path)
            at = max(0, min(len(path), at))
            text = path[:at] + context.note + path[at:]
        else:
            at = newline_offset(path, context.depth)
            note = context.note if context.note.endswith("\n") else context.note + "\n"
            if at and path[at - 1] != "\n":
                note = "\n" + note  # at the end of a line that has no newline yet
            text = path[:at] + note + path[at:]
    if context.memory:
        memory = context.memory if context.memory.endswith("\n") else context.memory + "\n"
        text = memory + text
    return text


def backend_cut(model_id: str) -> Cut:
    """Count tokens with the model's own tokenizer: the text's ids, the last n of them
    turned back into text, and where that tail starts. A tail that does not match the
    text's end (a character split between two byte tokens) takes one token more."""

    def cut(text: str, n: int) -> int:
        with BackendClient("interactive") as client:
            ids = client.tokenize(model_id, text, add_special_tokens=False)
            if n >= len(ids):
                return 0
            for take in (n, n + 1, n + 2):
                tail = client.detokenize(model_id, ids[-take:])
                if text.endswith(tail):
                    return len(text) - len(tail)
        # No clean boundary found: as near as characters per token allow.
        return max(0, len(text) - round(len(text) * n / len(ids)))

    return cut


def prompt_for(path: str, context: Context, model_id: str | None) -> str:
    """The prompt for a model (its tokenizer places a note counted in tokens). Raises
    BackendError when the backend cannot tokenize for a note counted in tokens."""
    needs_tokens = context.note and context.unit == TOKENS and context.depth
    if needs_tokens and not model_id:
        raise BackendError("invalid_request", "Pick a model to count the note's tokens with.")
    cut = backend_cut(model_id) if needs_tokens and model_id else None
    return assemble(path, context, cut=cut)
