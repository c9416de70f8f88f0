"""The format is detected from the top-level keys without building their values, and
the flat formats (loomsidian, exoloom, MiniLoom) are read node by node in two reads
(their skeleton, then each node written as read). Before, every top-level value was
built first: a 64 MB {"junk": [{}, {}, …]} peaked at ~1.6 GB before "Unrecognised
file", and a flat file at 6-11 times its size. Peaks are Python's (tracemalloc)."""

import json
import tracemalloc
import uuid

import pytest

from loom.formats.importers import ImportRefused, import_file
from loom.models import Node, Tree

pytestmark = pytest.mark.django_db

NODES = 6_000


def ids(n: int) -> list[str]:
    return [str(uuid.UUID(int=i + 1)) for i in range(n)]


def exoloom(n: int) -> bytes:
    keys = ids(n)
    nodes = {}
    for i, key in enumerate(reversed(keys)):  # children before their parents
        i = n - 1 - i
        nodes[key] = {
            "content": f" segment {i} of the story", "authorType": "LLM" if i % 2 else "USER",
            "authorName": "model-x", "parentId": keys[(i - 1) // 2] if i else None,
            "childrenIds": [keys[c] for c in (2 * i + 2, 2 * i + 1) if c < n],
            "createdAt": "2024-05-01T10:00:00Z",
        }  # fmt: skip
    lens = {"bookmarks": [{"nodeId": keys[3]}], "prunedNodes": [{"nodeId": keys[4]}]}
    tree = {"title": "t", "rootNodeId": keys[0], "nodes": nodes}
    return json.dumps({"loomType": "Exoloom", "version": "1", "schemaVersion": 1,
                       "tree": tree, "lens": lens}).encode()  # fmt: skip


def loomsidian(n: int) -> bytes:
    keys = ids(n)
    notes = {}
    for note in range(3):
        nodes = {}
        for i, key in enumerate(keys[note::3]):
            nodes[key] = {
                "text": f" segment {i} of note {note}", "collapsed": False, "unread": False,
                "parentId": keys[note::3][(i - 1) // 2] if i else None, "bookmarked": i == 5,
                "lastVisited": 1714557600000,
            }  # fmt: skip
        notes[f"notes/n{note}.md"] = {"current": keys[note], "hoisted": [], "nodes": nodes}
    return json.dumps({"settings": {"x": 1}, "state": notes}).encode()


def miniloom(n: int) -> bytes:
    store = {}
    for i in range(n):
        kids = [f"n{c}" for c in (2 * i + 1, 2 * i + 2) if c < n]
        store[f"n{i}"] = {
            "id": f"n{i}", "timestamp": 1714557600000, "type": "gen" if i % 2 else "user",
            "patch": "@@ -0,0 +1,3 @@\n+x0.\n" if i == 0 else "", "summary": "s",
            "rating": None, "read": True, "parent": f"n{(i - 1) // 2}" if i else None,
            "children": kids, "model": "m", "finishReason": "length",
        }  # fmt: skip
    return json.dumps({"loomTree": {"nodeStore": store}, "focus": {"id": "n1"}}).encode()


def peak_of(fn):
    tracemalloc.start()
    try:
        return fn(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", ["exoloom", "loomsidian", "miniloom"])
def test_it_imports_a_flat_file_within_three_times_its_size(fmt, make_user):
    data = {"exoloom": exoloom, "loomsidian": loomsidian, "miniloom": miniloom}[fmt](NODES)
    trees, peak = peak_of(lambda: import_file(make_user(), data, filename=f"t.{fmt}.json"))
    print(f"\n{fmt}: file {len(data):,} bytes, peak {peak:,} bytes ({peak / len(data):.2f}x)")
    assert sum(Node.objects.filter(tree=t).count() for t in trees) == NODES
    assert peak < 3 * len(data)


def test_it_keeps_what_the_flat_files_say(make_user):
    """Children in their parent's order (listed before their parent in the file),
    marks from the lens after the tree, several notes."""
    [tree] = import_file(make_user(), exoloom(40), filename="e.json")
    root = tree.root
    assert root.source_id == str(uuid.UUID(int=1))
    assert [c.source_id for c in root.children()] == [str(uuid.UUID(int=3)), str(uuid.UUID(int=2))]
    assert Node.objects.get(tree=tree, source_id=str(uuid.UUID(int=4))).bookmarked
    assert Node.objects.get(tree=tree, source_id=str(uuid.UUID(int=5))).archived
    notes = import_file(make_user(), loomsidian(30), filename="data.json")
    assert [t.title for t in notes] == ["n0", "n1", "n2"]
    assert all(Node.objects.filter(tree=t).count() == 10 for t in notes)
    [mini] = import_file(make_user(), miniloom(7), filename="m.json")
    assert Node.objects.get(tree=mini, source_id="n0").text == "x0."
    assert Node.objects.get(pk=mini.current_id).source_id == "n1"


def test_it_refuses_a_file_of_something_else_without_building_it(make_user):
    owner = make_user()
    peaks = []
    for count in (300_000, 1_200_000):  # 0.9 and 3.6 MB
        junk = b'{"junk": [' + b",".join([b"{}"] * count) + b'], "more": {"a": [[], {}]}}'
        refused, peak = peak_of(lambda: _refusal(owner, junk))  # noqa: B023
        assert "Unrecognised file" in refused
        peaks.append(peak)
        print(f"\njunk: file {len(junk):,} bytes, peak {peak:,} bytes ({peak / len(junk):.3f}x)")
    # Before: ~25 times the file (every {} built); now the read buffers (the first line,
    # a megabyte at most, looked at for JSONL), the same for four times the file.
    assert peaks[1] < 4e6 and peaks[1] < 1.2 * peaks[0] + 100_000
    assert not Tree.objects.exists()


def _refusal(owner, data: bytes) -> str:
    try:
        import_file(owner, data, filename="junk.json")
    except ImportRefused as exc:
        return str(exc)
    raise AssertionError("imported")
