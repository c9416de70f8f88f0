"""MiniLoom stores each node as a patch against its parent's full text. A
"comb" (a long spine, a leaf off every spine node, the leaves listed after the
spine) made the old import rebuild and keep a full text per spine node:
quadratic in depth in time and memory. Texts are now rebuilt along one path,
and a patch that only appends costs its own length."""

import io
import json
import time
import tracemalloc

import pytest

from loom.formats.importers import ImportRefused, import_file
from loom.formats.miniloom import read_texts
from loom.models import Node

pytestmark = pytest.mark.django_db

SPINE = 5_000
WORD = " spine step and some more words"


def _append_patch(base_len: int, context: str, insert: str) -> str:
    # diff-match-patch's text form of "keep the last len(context) chars, then insert".
    if base_len == 0:
        return f"@@ -0,0 +1,{len(insert)} @@\n+{insert}\n"
    start = base_len - len(context) + 1
    return f"@@ -{start},{len(context)} +{start},{len(context) + len(insert)} @@\n {context}\n+{insert}\n"


def comb(spine: int) -> tuple[bytes, str]:
    store, text, parent = {}, "", None
    for i in range(spine):
        sid, leaf = f"s{i}", f"l{i}"
        piece = f"{WORD} {i}."
        store[sid] = {"id": sid, "type": "user", "parent": parent, "children": [],
                      "patch": _append_patch(len(text), text[-4:], piece)}  # fmt: skip
        text += piece
        store[leaf] = {"id": leaf, "type": "gen", "parent": sid, "children": [],
                       "patch": _append_patch(len(text), text[-4:], f" leaf {i}")}  # fmt: skip
        if parent:
            store[parent]["children"] = [sid, store[parent]["children"][0]]
        store[sid]["children"] = [leaf]
        parent = sid
    return json.dumps({"loomTree": {"nodeStore": store}, "focus": parent}).encode(), text


def rebuild_seconds(data: bytes) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        read_texts(io.BytesIO(data))
        best = min(best, time.perf_counter() - started)
    return best


def test_it_rebuilds_a_deep_comb_in_linear_time_and_memory(make_user):
    data, spine_text = comb(SPINE)
    tracemalloc.start()
    skeleton, texts, _, _ = read_texts(io.BytesIO(data))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Time grows with depth like the work does: four times the depth costs about
    # four times as long when linear, sixteen when quadratic (as before).
    quarter = comb(SPINE // 4)[0]
    small, big = rebuild_seconds(quarter), rebuild_seconds(data)
    print(f"{len(data):,} bytes: peak {peak / 1e6:.1f} MB; {big:.3f} s vs {small:.3f} s at 1/4")
    # Before: 465 MB here (the memory bound is what failed) and x7 over the
    # quarter, rising with depth; then ~6 MB and ~x5 (linear, plus noise).
    assert peak < 100e6 and big / small < 9
    by_key = {key: texts[n] for key, n in skeleton.index.items()}
    assert "".join(by_key[f"s{i}"] for i in range(SPINE)) == spine_text
    assert by_key["l7"] == " leaf 7"

    [tree] = import_file(make_user(), data, filename="comb.json")
    deepest = Node.objects.get(tree=tree, source_id=f"s{SPINE - 1}")
    assert deepest.full_text() == spine_text
    assert Node.objects.filter(tree=tree).count() == 2 * SPINE


def test_it_caps_the_text_rewriting_patches_may_cost(make_user, monkeypatch):
    """Patches that rewrite their parent (not only append) cost its whole text each;
    their total is capped, so no file makes the import quadratic again."""
    from diff_match_patch import diff_match_patch

    from loom.formats import miniloom

    dmp, store, text, parent = diff_match_patch(), {}, "", None
    for i in range(60):
        new = f"Version {i}: " + text[-200:] + " and more words" * 3
        store[f"n{i}"] = {"id": f"n{i}", "parent": parent, "children": [f"n{i + 1}"],
                          "patch": dmp.patch_toText(dmp.patch_make(text, new))}  # fmt: skip
        text, parent = new, f"n{i}"
    store[parent]["children"] = []
    data = json.dumps({"loomTree": {"nodeStore": store}}).encode()
    monkeypatch.setattr(miniloom, "MAX_REBUILT_CHARS", 5_000)
    with pytest.raises(ImportRefused, match="too much to rebuild"):
        import_file(make_user(), data, filename="rewrites.json")
    monkeypatch.setattr(miniloom, "MAX_REBUILT_CHARS", 10_000_000)
    [tree] = import_file(make_user(), data, filename="rewrites.json")
    assert Node.objects.get(tree=tree, source_id="n59").extra["full_text"] == text
