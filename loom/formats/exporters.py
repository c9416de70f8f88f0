"""Streaming exports. Each exporter is a generator of str chunks that walks the
tree with Node.objects.preorder (an explicit stack over an ordered query), so
neither the nested pyloom JSON nor a 100,000-node tree is ever built in memory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache

from diff_match_patch import diff_match_patch, patch_obj

from loom.formats.miniloom import TextPath
from loom.models import Node, Tree

WEFT_FORMAT = "weft-loom"
WEFT_VERSION = 1

# key -> (file suffix, content type, label)
FORMATS = {
    "weft": ("weft.json", "application/json", "Weft JSON (lossless)"),
    "pyloom": ("pyloom.json", "application/json", "pyloom JSON"),
    "jsonl": ("nodes.jsonl", "application/x-ndjson", "JSONL of nodes"),
    "loomsidian": ("loomsidian.json", "application/json", "loomsidian data.json"),
    "exoloom": ("exoloom.json", "application/json", "exoloom"),
    "miniloom": ("miniloom.json", "application/json", "MiniLoom"),
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
    'rating', rating, 'prompt_context', prompt_context, 'source_id', source_id,
    'extra', extra, 'written_by', CASE WHEN written_by_id IS NOT NULL
        THEN (SELECT username FROM {users} WHERE id = written_by_id) END
)::text"""


@cache
def _weft_record() -> str:
    """The record's SQL, naming the user table once the models are loaded. `written_by`
    is the writer's username: an import does not map it back (a file could name
    anyone), so imported nodes have no writer."""
    users = Node._meta.get_field("written_by").related_model._meta.db_table
    return _WEFT_RECORD.format(users=users)


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
            "memory": tree.memory,
            "note": tree.note,
            "note_depth": tree.note_depth,
            "note_unit": tree.note_unit,
            "child_order": tree.child_order,
            "hide_down": tree.hide_down,
        },
    }
    yield _dump(head)[:-1] + ',"nodes":[\n'
    sep = ""
    for _depth, (record,) in Node.objects.preorder(tree, select=_weft_record()):
        yield sep + record
        sep = ",\n"
    yield "\n]}\n"


def jsonl(tree: Tree) -> Iterator[str]:
    for _depth, (record,) in Node.objects.preorder(tree, select=_weft_record()):
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
    current = _current_key(tree)
    if current is not None:
        top["selected_node_id"] = current
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


# --- loomsidian, exoloom, MiniLoom -------------------------------------------------------
# Flat formats: every node keyed by its id, naming its parent (and, in exoloom and
# MiniLoom, its children). Keys are the imported file's ids where there were any.

# Each node's children's keys, in order: one lookup on the (parent, position) index.
_CHILD_KEYS = """(SELECT COALESCE(json_agg(COALESCE(NULLIF(c.source_id, ''), 'weft-' || c.id)
    ORDER BY c.position, c.id), '[]') FROM loom_node c WHERE c.parent_id = loom_node.id)::text"""
_EPOCH_MS = "(extract(epoch FROM {0}) * 1000)::bigint"


def _flat_walk(tree: Tree, select: str) -> Iterator[tuple[str, str | None, tuple]]:
    """(key, parent key, the rest of the row) in preorder: parents come from
    the walk's stack of keys, one per depth, not from a lookup per row."""
    keys: list[str] = []
    for depth, (key, *rest) in Node.objects.preorder(tree, select=f"{_PYLOOM_KEY}, {select}"):
        del keys[depth:]
        yield key, keys[-1] if keys else None, tuple(rest)
        keys.append(key)


def _current_key(tree: Tree) -> str | None:
    if tree.current_id is None:
        return None
    row = Node.objects.filter(pk=tree.current_id, tree=tree).values("id", "source_id").first()
    return (row["source_id"] or f"weft-{row['id']}") if row else None


# loomsidian keeps no authors, tags or archive marks: only text, structure,
# bookmarks and the keys an imported note had (collapsed, unread, …).
_LOOMSIDIAN_NODE = f"""(
    jsonb_build_object('collapsed', false, 'unread', false)
    || (extra - 'text' - 'parentId' - 'bookmarked' - 'lastVisited')
    || jsonb_build_object('text', text, 'bookmarked', bookmarked,
        'lastVisited', {_EPOCH_MS.format("COALESCE(visited_at, created_at)")})
)::text"""


def loomsidian_json(tree: Tree) -> Iterator[str]:
    """{"state": {note: {current, hoisted, nodes: {id: {text, parentId, …}}}}}:
    one note, named after the imported note or the tree's title."""
    kept = (tree.extra or {}).get("loomsidian") or {}
    note = kept.get("note") if isinstance(kept.get("note"), str) else f"{tree.title}.md"
    hoisted = kept.get("hoisted") if isinstance(kept.get("hoisted"), list) else []
    yield '{"state":{' + _dump(note) + ':{"nodes":{'
    sep = ""
    for key, parent, (record,) in _flat_walk(tree, _LOOMSIDIAN_NODE):
        yield f'{sep}{_dump(key)}:{record[:-1]},"parentId":{_dump(parent)}}}'
        sep = ",\n"
    yield '},"current":' + _dump(_current_key(tree)) + ',"hoisted":' + _dump(hoisted) + "}}}\n"


_EXOLOOM_NODE = f"""json_build_object(
    'content', text,
    'authorType', CASE WHEN author = 'model' THEN 'LLM' ELSE 'USER' END,
    'authorName', COALESCE(NULLIF(extra ->> 'authorName', ''), NULLIF(checkpoint, ''),
        CASE WHEN author = 'model' THEN 'model' ELSE 'user' END),
    'childrenIds', {_CHILD_KEYS}::json,
    'createdAt', created_at)::text, bookmarked, archived"""


def exoloom_json(tree: Tree) -> Iterator[str]:
    """{loomType, tree: {title, rootNodeId, nodes}, lens: {bookmarks, prunedNodes}}.
    Bookmarks and archived nodes become exoloom's lens marks; tags are not kept."""
    kept = (tree.extra or {}).get("exoloom") or {}
    head = {"loomType": "Exoloom", "version": kept.get("version") or "1", "schemaVersion": 1}
    yield _dump(head)[:-1] + ',"tree":{"title":' + _dump(tree.title) + ',"nodes":{'
    sep, root = "", None
    marks: dict[str, list[dict]] = {"bookmarks": [], "prunedNodes": []}
    for key, parent, (record, bookmarked, archived) in _flat_walk(tree, _EXOLOOM_NODE):
        root = root or key
        if bookmarked:
            marks["bookmarks"].append({"nodeId": key})
        if archived:
            marks["prunedNodes"].append({"nodeId": key})
        yield f'{sep}{_dump(key)}:{record[:-1]},"id":{_dump(key)},"parentId":{_dump(parent)}}}'
        sep = ",\n"
    yield '},"rootNodeId":' + _dump(root) + '},"lens":' + _dump(marks) + "}\n"


_MINILOOM_COLUMNS = f"""text, author, checkpoint, finish_reason,
    {_EPOCH_MS.format("created_at")}, visited_at IS NOT NULL, extra, {_CHILD_KEYS}, rating"""
# Context before an appended segment, as diff-match-patch's patch_make keeps.
_PATCH_MARGIN = 4


def _append_patch(dmp: diff_match_patch, path: TextPath, segment: str) -> str:
    """The patch that appends `segment` to the path's text, built from its last
    few characters rather than by diffing the whole text."""
    if not segment:
        return ""
    context = path.tail(_PATCH_MARGIN)
    patch = patch_obj()
    patch.diffs = (
        [(dmp.DIFF_EQUAL, context), (dmp.DIFF_INSERT, segment)]
        if context
        else [(dmp.DIFF_INSERT, segment)]
    )
    patch.start1 = patch.start2 = path.length() - len(context)
    patch.length1 = len(context)
    patch.length2 = len(context) + len(segment)
    return dmp.patch_toText([patch])


def miniloom_json(tree: Tree) -> Iterator[str]:
    """{loomTree: {nodeStore: {id: {…, patch, parent, children}}}, focus}. A node's
    patch turns its parent's full text into its own. A node imported from
    MiniLoom that rewrote its parent's text (extra['full_text']) gets the patch
    for that rewrite again."""
    dmp = diff_match_patch()
    path = TextPath()
    current = _current_key(tree)
    focus = None
    yield '{"loomTree":{"nodeStore":{'
    sep = ""
    walk = Node.objects.preorder(tree, select=f"{_PYLOOM_KEY}, {_MINILOOM_COLUMNS}")
    keys: list[str] = []
    for depth, (key, text, author, model, finish, stamp, read, extra, kids, rating) in walk:
        del keys[depth:]
        path.cut_to(keys[-1] if keys else None)
        extra = json.loads(extra) if isinstance(extra, str) else extra  # Django reads jsonb as text
        full = extra.get("full_text")
        if isinstance(full, str) and full.endswith(text) and depth:
            patch = dmp.patch_toText(dmp.patch_make(path.text(), full))
            path.push(key, full, full=True)
        else:
            patch = _append_patch(dmp, path, text)
            path.push(key, text, full=False)
        kind = extra.get("type") or (
            "root" if not depth else "gen" if author == "model" else "user"
        )
        node = {
            "id": key,
            "timestamp": stamp,
            "type": kind,
            "patch": patch,
            "summary": extra.get("summary", ""),
            # MiniLoom's thumbs: true up, false down, null none (Weft's rating).
            "rating": {1: True, -1: False}.get(rating),
            "read": bool(extra.get("read")) or read,
            "parent": keys[-1] if keys else None,
            "children": json.loads(kids),
            "model": model or extra.get("model") or None,
            "finishReason": finish or extra.get("finishReason") or None,
        }
        if key == current:
            focus = node
        yield sep + _dump(key) + ":" + _dump(node)
        sep = ",\n"
        keys.append(key)
    yield '}},"focus":' + _dump(focus) + "}\n"


# key -> exporter of the whole tree (the path exports, txt and md, take a node)
TREE_EXPORTERS = {
    "weft": weft_json,
    "pyloom": pyloom_json,
    "jsonl": jsonl,
    "loomsidian": loomsidian_json,
    "exoloom": exoloom_json,
    "miniloom": miniloom_json,
}
