"""Streaming exports. Each exporter is a generator of str chunks that walks the
tree with Node.objects.preorder (an explicit stack over an ordered query), so
neither the nested pyloom JSON nor a 100,000-node tree is ever built in memory."""

from __future__ import annotations

import json
from collections.abc import Iterator

from loom.models import Node, Tree

WEFT_FORMAT = "weft-loom"
WEFT_VERSION = 1

# key -> (file suffix, content type, label)
FORMATS = {
    "weft": ("weft.json", "application/json", "Weft JSON (lossless)"),
    "pyloom": ("pyloom.json", "application/json", "pyloom JSON"),
    "jsonl": ("nodes.jsonl", "application/x-ndjson", "JSONL of nodes"),
    "txt": ("txt", "text/plain; charset=utf-8", "Plain text of the current path"),
    "md": ("md", "text/markdown; charset=utf-8", "Markdown of the current path"),
}

_dump = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


# Postgres writes each Weft record as JSON text: decoding the JSON columns into
# Python and encoding them again was most of the export's time.
_WEFT_RECORD = """json_build_object(
    'id', id, 'parent_id', parent_id, 'position', position, 'text', text, 'author', author,
    'checkpoint', checkpoint, 'request_id', request_id, 'params', params, 'seed', seed,
    'finish_reason', finish_reason, 'logprobs', logprobs, 'created_at', created_at,
    'visited_at', visited_at, 'bookmarked', bookmarked, 'tags', tags, 'archived', archived,
    'source_id', source_id, 'extra', extra)::text"""


def weft_json(tree: Tree) -> Iterator[str]:
    head = {
        "format": WEFT_FORMAT,
        "version": WEFT_VERSION,
        "tree": {
            "title": tree.title,
            "settings": tree.settings,
            "extra": tree.extra,
            "created_at": tree.created_at.isoformat(),
            "current": tree.current_id,
        },
    }
    yield _dump(head)[:-1] + ',"nodes":[\n'
    sep = ""
    for _depth, (record,) in Node.objects.preorder(tree, select=_WEFT_RECORD):
        yield sep + record
        sep = ",\n"
    yield "\n]}\n"


def jsonl(tree: Tree) -> Iterator[str]:
    for _depth, (record,) in Node.objects.preorder(tree, select=_WEFT_RECORD):
        yield record + "\n"


# Each pyloom node is built as JSON by Postgres, like the Weft records: keys
# kept from an imported file (`extra`) first, then Weft's own values on top.
_PYLOOM_NODE = """(
    jsonb_build_object('open', true, 'visited', visited_at IS NOT NULL)
    || CASE WHEN author = 'model' THEN jsonb_build_object('generation', jsonb_build_object(
        'model', checkpoint, 'id', request_id, 'finish_reason', finish_reason))
       ELSE '{}'::jsonb END
    || (extra - 'children' - 'parent_id')
    || jsonb_build_object(
        'id', COALESCE(NULLIF(source_id, ''), 'weft-' || id),
        'text', text,
        'meta', jsonb_build_object(
                'creation_timestamp', created_at,
                'source', CASE WHEN author = 'model' THEN 'AI' ELSE 'prompt' END)
            || CASE WHEN jsonb_typeof(extra -> 'meta') = 'object' THEN extra -> 'meta'
               ELSE '{}'::jsonb END,
        'tags', tags
            || CASE WHEN bookmarked AND NOT tags ? 'bookmark' THEN '["bookmark"]'::jsonb
               ELSE '[]'::jsonb END
            || CASE WHEN archived AND NOT tags ? 'archived' THEN '["archived"]'::jsonb
               ELSE '[]'::jsonb END)
)::text"""
# The walk knows each node's parent, so parent_id is added in Python from the
# key stack rather than by a lookup per row.
_PYLOOM_KEY = "COALESCE(NULLIF(source_id, ''), 'weft-' || id)"


def _pyloom_top(tree: Tree) -> dict:
    kept = dict((tree.extra or {}).get("pyloom") or {})
    s = tree.settings or {}
    kept.setdefault("chapters", {})
    kept.setdefault("canonical", [])
    kept.setdefault("memories", {})
    kept.setdefault("summaries", {})
    kept.setdefault("model_responses", {})
    kept.setdefault(
        "generation_settings",
        {
            k: v
            for k, v in {
                "model": s.get("model"),
                "num_continuations": s.get("n"),
                "temperature": s.get("temperature"),
                "top_p": s.get("top_p"),
                "response_length": s.get("max_tokens"),
            }.items()
            if v is not None
        },
    )
    kept.setdefault(
        "tags",
        {
            "bookmark": {"name": "bookmark", "scope": "node", "hide": False, "toggle_key": "b"},
            "archived": {"name": "archived", "scope": "node", "hide": True, "toggle_key": "!"},
        },
    )
    kept.pop("root", None)
    return kept


def pyloom_json(tree: Tree) -> Iterator[str]:
    """{"root": {…, "children": [{…}, …]}, "chapters": …}: each node's own keys
    are written when the walk enters it, its closing brackets when the walk
    leaves it, tracked by depth alone."""
    yield '{"root":'
    keys: list[str] = []  # pyloom ids of the open nodes, one per depth
    select = f"{_PYLOOM_KEY}, {_PYLOOM_NODE}"
    for depth, (key, record) in Node.objects.preorder(tree, select=select):
        if depth < len(keys):
            yield "]}" * (len(keys) - depth) + ","
            del keys[depth:]
        parent = ',"parent_id":' + _dump(keys[-1]) if keys else ""
        yield record[:-1] + parent + ',"children":['  # a node always has id and text
        keys.append(key)
    yield "]}" * len(keys)
    top = _pyloom_top(tree)
    current = Node.objects.filter(pk=tree.current_id, tree=tree).values("id", "source_id").first()
    if current:
        top["selected_node_id"] = current["source_id"] or f"weft-{current['id']}"
    for key, value in top.items():
        yield "," + _dump(key) + ":" + _dump(value)
    yield "}\n"


def path_text(node: Node) -> Iterator[str]:
    for seg in Node.objects.path_to(node):
        yield seg.text


def path_markdown(tree: Tree, node: Node) -> Iterator[str]:
    """The title and the path's text, then a table of the segments with their
    authors: emphasis markers would break on arbitrary text, a table does not."""
    segments = Node.objects.path_to(node)
    yield f"# {tree.title}\n\n"
    yield "".join(s.text for s in segments).rstrip() + "\n\n"
    yield "## Segments\n\n| # | author | text |\n|---|---|---|\n"
    for i, seg in enumerate(segments):
        cell = seg.text.replace("|", "\\|").replace("\n", "⏎")
        yield f"| {i} | {seg.author} | {cell} |\n"
