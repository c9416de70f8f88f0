"""Peak memory of a Loom import in the web process, against the size of the file.

    .venv/bin/python bench/loom_import_memory.py [--mb 64] [--formats junk,exoloom,...]
                                                 [--code DIR]

Writes one file per format to a scratch folder (junk: {"junk": [{}, {}, …]}, which is
no loom file; exoloom, loomsidian and MiniLoom flat files; Weft JSON), then imports
each in a fresh subprocess, as the upload view does (the file object read from disk,
never whole), against a scratch Postgres. Reported per file: its size, the resident
size just before the import, the peak's growth over it during the import (VmHWM,
reset just before: setting Django up peaks higher than an import's start), the ratio
of that growth to the file's size,
the time and the outcome. The baseline, side by side: the file's size itself, and
with --code the same files imported by another checkout's code, e.g. the code before
this change:

    mkdir /tmp/old && git archive <commit> | tar -x -C /tmp/old
    .venv/bin/python bench/loom_import_memory.py --code /tmp/old
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stack import start_services  # noqa: E402
from config import launcher  # noqa: E402

CHILD = r"""
import os, re, sys, time
sys.path.insert(0, os.getcwd())
import django
django.setup()
from django.contrib.auth import get_user_model
from loom.formats.importers import ImportRefused, import_file
user, _ = get_user_model().objects.get_or_create(username="bench")

def status(field):  # KiB
    with open("/proc/self/status") as status:
        return int(re.search(field + r":\s+(\d+)", status.read())[1])

before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as clear:  # the peak from here on (Linux)
    clear.write("5")
started = time.perf_counter()
with open(sys.argv[1], "rb") as upload:
    try:
        outcome = f"{len(import_file(user, upload, filename=sys.argv[2]))} tree(s)"
    except ImportRefused as exc:
        outcome = "refused: " + str(exc)[:40]
after = status("VmHWM")
print(before, after, time.perf_counter() - started, outcome)
"""


def key(i: int) -> str:
    return str(uuid.UUID(int=i + 1))


def write_nodes(out, count: int, node) -> None:
    """`"<key>": {node}` entries, comma-separated, streamed (never one big object)."""
    for i in range(count):
        out.write(("," if i else "") + json.dumps(key(i)) + ":" + json.dumps(node(i)))


def exoloom(out, count: int) -> None:
    out.write('{"loomType": "Exoloom", "version": "1", "schemaVersion": 1, "tree": {"title": "b",'
              f' "rootNodeId": "{key(0)}", "nodes": {{')  # fmt: skip
    write_nodes(out, count, lambda i: {
        "content": f" segment {i} of the story", "authorType": "LLM" if i % 2 else "USER",
        "authorName": "model-x", "parentId": key((i - 1) // 2) if i else None,
        "childrenIds": [key(c) for c in (2 * i + 1, 2 * i + 2) if c < count],
        "createdAt": "2024-05-01T10:00:00Z"})  # fmt: skip
    out.write('}}, "lens": {"bookmarks": [], "prunedNodes": []}}')


def loomsidian(out, count: int) -> None:
    out.write('{"settings": {}, "state": {"notes/bench.md": {"current": null, "hoisted": [], '
              '"nodes": {')  # fmt: skip
    write_nodes(out, count, lambda i: {
        "text": f" segment {i} of the story", "parentId": key((i - 1) // 2) if i else None,
        "collapsed": False, "unread": False, "bookmarked": False, "lastVisited": 1714557600000})  # fmt: skip
    out.write("}}}}")


def miniloom(out, count: int) -> None:
    out.write('{"loomTree": {"nodeStore": {')
    write_nodes(out, count, lambda i: {
        "id": key(i), "timestamp": 1714557600000, "type": "gen" if i % 2 else "user",
        "patch": "", "summary": "s", "rating": None, "read": True,
        "parent": key((i - 1) // 2) if i else None,
        "children": [key(c) for c in (2 * i + 1, 2 * i + 2) if c < count],
        "model": "m", "finishReason": "length"})  # fmt: skip
    out.write('}}, "focus": null}')


def weft(out, count: int) -> None:
    out.write('{"format": "weft-loom", "version": 1, "tree": {"title": "b"}, "nodes": [')
    for i in range(count):
        node = {"id": i + 1, "parent_id": (i + 1) // 2 or None, "text": f" segment {i}" + "x" * 40}
        out.write(("," if i else "") + json.dumps(node))
    out.write("]}")


def junk(out, count: int) -> None:
    out.write('{"junk": [' + ",".join(["{}"] * count) + "]}")


# Bytes per node (measured), to aim at --mb.
FORMATS = {"junk": (junk, 3), "exoloom": (exoloom, 300), "loomsidian": (loomsidian, 215),
           "miniloom": (miniloom, 335), "weft": (weft, 108)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=64)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--code", default=str(Path(__file__).resolve().parent.parent))
    args = ap.parse_args()
    scratch = launcher.scratch_dir("loom-import-memory")
    sup = launcher.Supervisor()
    try:
        env = start_services(scratch, sup)
        print(f"code: {args.code}")
        print(f"{'format':<11} {'file MB':>8} {'base MB':>8} {'peak MB':>8} {'x file':>7} {'s':>6}"
              "  outcome")  # fmt: skip
        for name in args.formats.split(","):
            write, per_node = FORMATS[name]
            path = scratch / f"{name}.json"
            with path.open("w") as out:
                write(out, int(args.mb * 1e6 / per_node))
            size = path.stat().st_size / 1e6
            done = subprocess.run([sys.executable, "-c", CHILD, str(path), path.name],
                                  cwd=args.code, env=env, capture_output=True, text=True)  # fmt: skip
            if done.returncode:
                print(f"{name:<11} {size:8.1f} failed: {done.stderr.strip().splitlines()[-1]}")
                continue
            before, after, seconds, *outcome = done.stdout.split()
            peak = (int(after) - int(before)) / 1024
            print(f"{name:<11} {size:8.1f} {int(before) / 1024:8.1f} {peak:8.1f} {peak / size:7.2f}"
                  f" {float(seconds):6.1f}  {' '.join(outcome)}")  # fmt: skip
            path.unlink()
    finally:
        sup.stop_all()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
