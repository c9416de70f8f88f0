"""A big Weft JSON or JSONL import is read and written node by node: Python's
peak memory stays well under the file's size (json.loads alone made several
times the file in objects, and the whole tree was held until written). The
upload view refuses an oversized file before parsing it, with a message."""

import json
import tracemalloc

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from loom.formats import exporters, importers
from loom.formats.importers import import_file
from loom.models import Node, Tree
from tests.loom.conftest import tree_shape

pytestmark = pytest.mark.django_db

NODES = 12_000


def weft_file(nodes: int) -> bytes:
    lines = [{"id": 1, "parent_id": None, "text": "root"}]
    for i in range(2, nodes + 1):
        text = f" node {i} " + "x" * 200
        lines.append({
            "id": i, "parent_id": max(1, i - 1 - i % 5), "text": text, "author": "model",
            "params": {"n": 2, "max_tokens": 48, "temperature": 0.8}, "seed": i,
            "logprobs": {"tokens": [text], "token_logprobs": [-0.25],
                         "top_logprobs": [{text: -0.25, " other": -1.5, " third": -2.5}]},
        })  # fmt: skip
    return json.dumps({"format": "weft-loom", "version": 1, "tree": {"title": "big"},
                       "nodes": lines}).encode()  # fmt: skip


def peak_of(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_it_imports_a_big_weft_file_in_less_memory_than_the_file(make_user):
    data = weft_file(NODES)
    [tree], peak = peak_of(lambda: import_file(make_user(), data, filename="big.json"))
    assert Node.objects.filter(tree=tree).count() == NODES
    print(f"file {len(data):,} bytes, peak {peak:,} bytes ({peak / len(data):.2f}x)")
    # Before: json.loads alone peaked at 3.4x this file; now ~0.5x (a batch and the skeleton).
    assert peak < 1.0 * len(data)


def test_it_imports_its_jsonl_export_line_by_line(make_tree):
    tree = make_tree(prompt="Root")
    a = tree.root.add_child(" a")
    a.add_child(" a1").toggle_bookmark()
    tree.root.add_child(" b")
    data = "".join(exporters.jsonl(tree)).encode()
    [back] = import_file(tree.owner, data, filename="t.nodes.jsonl")
    assert tree_shape(back) == tree_shape(tree) and back.title == "Root"


def test_it_refuses_an_oversized_upload_before_reading_it(client, make_user, monkeypatch):
    monkeypatch.setattr(importers, "MAX_IMPORT_BYTES", 1000)
    client.force_login(make_user())
    upload = SimpleUploadedFile("big.json", b" " * 2000)
    page = client.post("/loom/import/", {"file": upload}, follow=True)
    assert "Import refused: the file is 2,000 bytes; the limit is 1,000" in page.text
    assert not Tree.objects.exists()
