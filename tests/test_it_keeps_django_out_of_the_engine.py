"""The engine is a standalone service: it validates with the door's request schema
(`completions.schema`, one definition of every rule) but never imports Django. A
subprocess blocks Django with a sys.meta_path hook and imports every engine module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent

SCRIPT = """
import importlib, importlib.abc, pkgutil, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "django":
            raise ImportError(f"blocked: {name}")
        return None

sys.meta_path.insert(0, Block())
names = sys.argv[1:]
for package in list(names):
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), package + "."):
        importlib.import_module(info.name)
        names.append(info.name)
print(" ".join(sorted(m for m in sys.modules if m.startswith(("engine", "completions")))))
"""


def _import(*modules: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *modules],
        cwd=BASE, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_it_imports_every_engine_module_without_django():
    done = _import("engine")
    assert done.returncode == 0, done.stderr[-3000:]
    imported = done.stdout.split()
    assert "engine.app" in imported and "engine.scripted" in imported  # walked the package
    # ... and the engine's rules are the door's schema, not a copy.
    assert "completions.schema" in imported


def test_it_blocks_what_it_says_it_blocks():
    """The hook itself works: the door's views do import Django."""
    done = _import("completions.views")
    assert done.returncode != 0 and "blocked: django" in done.stderr
