"""MiniLoom files: each node is a diff-match-patch patch against its parent's
full text, rebuilt along one path at a time (work linear in the file)."""

from __future__ import annotations

import os

from diff_match_patch import diff_match_patch

from loom.formats.records import (
    ImportRefused,
    Parsed,
    Rec,
    as_dict,
    as_key,
    as_str,
    as_when,
    check_size,
    order_flat,
    single_root,
)
from loom.models import Author

# Characters of parent text re-patched in full over a whole file (patches that
# only append cost nothing here): a few times the largest file's size.
MAX_REBUILT_CHARS = 256 * 1024 * 1024

# --- MiniLoom --------------------------------------------------------------------------------


def parse_miniloom(doc: dict, title: str) -> Parsed:
    """Each MiniLoom node holds a diff-match-patch patch against its parent's
    full text. Rebuild full texts top-down; a node's segment is what it adds
    to its parent's text. A node that rewrites its parent's text instead of
    extending it keeps its full text in extra['full_text'] and its segment is
    the part after the common prefix."""
    store = as_dict(as_dict(doc["loomTree"], "loomTree").get("nodeStore"), "loomTree.nodeStore")
    check_size(len(store))
    dmp = diff_match_patch()
    records: dict[str, Rec] = {}
    order: dict[str, list[str]] = {}
    patches: dict[str, str] = {}
    for nid, n in store.items():
        n = as_dict(n, f"node {nid!r}")
        parent = n.get("parent")
        kids = n.get("children") or []
        if not isinstance(kids, list):
            raise ImportRefused(f"Node {nid!r}: children must be a list.")
        order[nid] = [str(k) for k in kids]
        patch = n.get("patch", "")
        if isinstance(patch, list):  # some versions store patch objects serialised as text lines
            patch = "".join(str(p) for p in patch)
        patches[nid] = as_str(patch, f"node {nid!r} patch")
        is_model = n.get("type") == "gen"
        records[nid] = Rec(
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
    ordered = order_flat(records, order)
    path = TextPath()
    rebuilt = 0
    for rec in ordered:
        path.cut_to(rec.parent)
        segment = _appended(dmp, patches[rec.key], path, rec.key)
        if segment is not None:
            rec.text = segment
            path.push(rec.key, segment, full=False)
            continue
        base = path.text()
        # Only a patch that rewrites its parent costs the parent's whole text; a
        # file made of those would be quadratic again, so its total is capped.
        rebuilt += len(base)
        if rebuilt > MAX_REBUILT_CHARS:
            raise ImportRefused(
                f"The file's patches rewrite over {MAX_REBUILT_CHARS:,} characters of text "
                f"(at node {rec.key!r}): too much to rebuild."
            )
        try:
            text, ok = dmp.patch_apply(dmp.patch_fromText(patches[rec.key]), base)
        except ValueError as exc:
            raise ImportRefused(f"Node {rec.key!r}: its patch cannot be read ({exc}).") from None
        if not all(ok):
            raise ImportRefused(f"Node {rec.key!r}: its patch does not apply to its parent's text.")
        if text.startswith(base):
            rec.text = text[len(base) :]
            path.push(rec.key, rec.text, full=False)
        else:
            rec.text = text[len(os.path.commonprefix((base, text))) :]
            rec.extra["full_text"] = text
            path.push(rec.key, text, full=True)
    focus = doc.get("focus")
    focus_id = focus.get("id") if isinstance(focus, dict) else focus
    return Parsed(
        fmt="miniloom",
        title="",  # nor do MiniLoom's: the first text names it
        fallback=title,
        records=single_root(ordered),
        extra={"miniloom": {"focus": focus_id}},
        current=str(focus_id) if isinstance(focus_id, str | int) else None,
    )


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
