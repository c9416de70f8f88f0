"""The three pages that send a generation, posted in-process: each helper posts a
page's parameter form and returns the response; `error_next_to` reads the message
shown next to a field (each page's own error slot)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import httpx
import pytest
from django.test import Client

from engine.testing import run_engine


@pytest.fixture(scope="module")
def scripted_url() -> Iterator[str]:
    with run_engine("scripted") as url:
        yield url


@pytest.fixture
def scripted(settings, scripted_url) -> str:
    """This process's door talks to the scripted engine, its request log emptied."""
    settings.WEFT_BACKEND_URL = f"{scripted_url}/v1"
    httpx.delete(f"{scripted_url}/_scripted/requests", timeout=5)
    return scripted_url


def sent(base: str) -> list[dict]:
    """The completions the scripted engine received."""
    got = httpx.get(f"{base}/_scripted/requests", timeout=5).json()["requests"]
    return [r for r in got if r["path"] == "/v1/completions"]


def post_workbench(client: Client, fields: dict[str, str]) -> str:
    data = {"model": "scripted", "prompt": "Once", "max_tokens": "8", **fields}
    return client.post("/workbench/run/", data, headers={"HX-Request": "true"}).text


def post_loom(client: Client, tree, fields: dict[str, str]) -> str:
    url = f"/loom/{tree.pk}/n/{tree.root.pk}/generate/"
    return client.post(url, {"model": "scripted", **fields}, headers={"HX-Request": "true"}).text


def post_inspect(client: Client, fields: dict[str, str]) -> str:
    data = {"source": "text", "model": "scripted", "text": "Once", "k": "3",
            "add_special_tokens": "on", **fields}  # fmt: skip
    return client.post("/inspect/score/", data, headers={"HX-Request": "true"}).text


SLOT = {"workbench": "err-{}", "loom": "gen-err-{}", "inspect": "score-err-{}"}


def error_next_to(page: str, html: str, field: str) -> str:
    """The text of the error slot next to `field` on `page` (the last one in the
    response: an out-of-band swap replaces the page's own)."""
    slot = SLOT[page].format(field)
    found = re.findall(rf'<span id="{slot}"[^>]*>(.*?)</span>', html, re.S)
    assert found, f"no error slot {slot} in the response"
    return unescape(re.sub(r"<[^>]+>", " ", found[-1])).strip()
