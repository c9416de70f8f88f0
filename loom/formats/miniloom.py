"""MiniLoom files: each node is a diff-match-patch patch against its parent's
full text, rebuilt along one path at a time (work linear in the file).

Read twice, node by node (a node may come before its parent): first the skeleton
(records.Skeleton) and every patch, from which each node's text is rebuilt top-down,
then each node written as it is read."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO, Any

from diff_match_patch import diff_match_patch

from loom.formats.jsonstream import Events
from loom.formats.records import (
    ImportRefused,
    Parsed,
    PlannedWriter,
    Rec,
    Skeleton,
    as_dict,
    as_key,
    as_str,
    as_when,
)
from loom.models import Author, Tree

# Characters of parent text re-patched in full over a whole file (patches that
# only append cost nothing here): a few times the largest file's size.
MAX_REBUILT_CHARS = 256 * 1024 * 1024

# --- MiniLoom --------------------------------------------------------------------------------


def import_miniloom(source: IO[bytes], title: str, owner: Any) -> Tree:
    """Each MiniLoom node holds a diff-match-patch patch against its parent's
    full text. Rebuild full texts top-down; a node's segment is what it adds
    to its parent's text. A node that rewrites its parent's text instead of
    extending it keeps its full text in extra['full_text'] and its segment is
    the part after the common prefix."""
    skeleton, texts, rewritten, focus = read_texts(source)
    skeleton.forget()
    source.seek(0)
    writer = PlannedWriter(owner, skeleton)

    def write(nid: str, n: dict) -> None:
        rec, _, _ = _record(nid, n)
        number = writer.upcoming
        rec.text = texts[number]
        if number in rewritten:
            rec.extra["full_text"] = rewritten[number]
        writer.add(rec)

    _read(Events(source), write)
    parsed = Parsed(
        fmt="miniloom", title="", fallback=title, records=[], extra={"miniloom": {"focus": focus}}
    )
    return writer.finish(parsed, check=False)


def read_texts(source: IO[bytes]) -> tuple[Skeleton, list[str], dict[int, str], Any]:
    """The first read: the skeleton (its current node the file's focus), each node's
    segment (by its number there), the full text of each node that rewrites its
    parent's, and the focus's id."""
    skeleton = Skeleton()
    patches: dict[int, str] = {}

    def sketch(nid: str, n: dict) -> None:
        rec, kids, patch = _record(nid, n)
        skeleton.add(nid, rec.parent, kids)
        patches[skeleton.index[nid]] = patch

    focus = _read(Events(source), sketch)
    skeleton.check()
    focus_id = focus.get("id") if isinstance(focus, dict) else focus
    skeleton.current = skeleton.find(focus_id)
    texts, rewritten = _rebuild(skeleton, patches)
    return skeleton, texts, rewritten, focus_id


def _rebuild(skeleton: Skeleton, patches: dict[int, str]) -> tuple[list[str], dict[int, str]]:
    dmp = diff_match_patch()
    texts = [""] * len(skeleton.keys)
    rewritten: dict[int, str] = {}
    path = TextPath()
    rebuilt = 0
    for number in skeleton.preorder():
        key, parent = skeleton.keys[number], skeleton.parent[number]
        patch = patches.pop(number)  # each patch is read once: let it go
        path.cut_to(None if parent < 0 else skeleton.keys[parent])
        segment = _appended(dmp, patch, path, key)
        if segment is not None:
            texts[number] = segment
            path.push(key, segment, full=False)
            continue
        base = path.text()
        # Only a patch that rewrites its parent costs the parent's whole text; a
        # file made of those would be quadratic again, so its total is capped.
        rebuilt += len(base)
        if rebuilt > MAX_REBUILT_CHARS:
            raise ImportRefused(
                f"The file's patches rewrite over {MAX_REBUILT_CHARS:,} characters of text "
                f"(at node {key!r}): too much to rebuild."
            )
        try:
            text, ok = dmp.patch_apply(dmp.patch_fromText(patch), base)
        except ValueError as exc:
            raise ImportRefused(f"Node {key!r}: its patch cannot be read ({exc}).") from None
        if not all(ok):
            raise ImportRefused(f"Node {key!r}: its patch does not apply to its parent's text.")
        if text.startswith(base):
            texts[number] = text[len(base) :]
            path.push(key, texts[number], full=False)
        else:
            texts[number] = text[len(os.path.commonprefix((base, text))) :]
            rewritten[number] = text
            path.push(key, text, full=True)
    return texts, rewritten


def _read(events: Events, on_node: Callable[[str, dict], None]) -> Any:
    """One read of the file: each node of loomTree.nodeStore to on_node as it comes;
    returns the focus (everything else in the file is passed by unbuilt)."""
    focus = None
    store = False
    for key in events.keys("The file"):
        if key == "loomTree":
            for field in events.keys("loomTree"):
                if field == "nodeStore":
                    store = True
                    for nid in events.keys("loomTree.nodeStore"):
                        on_node(nid, as_dict(events.value(), f"node {nid!r}"))
                else:
                    events.skip()
        elif key == "focus":
            focus = events.value()
        else:
            events.skip()
    events.end()
    if not store:
        raise ImportRefused("loomTree.nodeStore must be an object, not null.")
    return focus


def _record(nid: str, n: dict) -> tuple[Rec, list[str], str]:
    """The node's record (its text still to rebuild), its children's ids and its patch."""
    parent = n.get("parent")
    kids = n.get("children") or []
    if not isinstance(kids, list):
        raise ImportRefused(f"Node {nid!r}: children must be a list.")
    patch = n.get("patch", "")
    if isinstance(patch, list):  # some versions store patch objects serialised as text lines
        patch = "".join(str(p) for p in patch)
    is_model = n.get("type") == "gen"
    rec = Rec(
        key=nid,
        parent=None if parent in (None, "") else as_key(parent, f"node {nid!r} parent"),
        text="",
        author=Author.MODEL if is_model else Author.HUMAN,
        source_id=nid,
        created_at=as_when(n.get("timestamp")),
        fields={
            k: v
            for k, v in {
                "checkpoint": str(n.get("model") or "")[:300] if is_model else "",
                "finish_reason": str(n.get("finishReason") or "")[:20],
                # MiniLoom's thumbs (true up, false down) are Weft's rating.
                "rating": {True: 1, False: -1}.get(n["rating"])
                if isinstance(n.get("rating"), bool)
                else None,
            }.items()
            if v
        },
        extra={k: n[k] for k in ("type", "summary", "read", "model", "finishReason") if k in n},
    )
    return rec, [str(k) for k in kids], as_str(patch, f"node {nid!r} patch")


class TextPath:
    """The full text along a walk's current path (the importer's and MiniLoom
    export's), kept as the segments each
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


def _appended(dmp: diff_match_patch, patch_text: str, path: TextPath, key: str) -> str | None:
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
