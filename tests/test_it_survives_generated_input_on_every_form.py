"""Every form and import endpoint, fed values nobody thought of (hypothesis): NUL
bytes, huge and odd numbers, unicode, empty strings, lists where one value is
expected, random path ids, odd files. Posted in-process as a logged-in user,
against the scripted engine (a real HTTP server) for anything that reaches the
backend.

Two properties per request: never a server error (5xx), and when the request is
refused (a 4xx, an error message, an alert on the page) the user's data is
exactly as before.

The endpoints come from the URLconf: `test_it_knows_every_url` fails when a URL
is neither described in FORMS (its method and the fields it reads) nor listed in
NOT_FUZZED with a reason, so a new form cannot be forgotten. Path ids: an `<int>`
is the id of one of the user's own objects of that kind most of the time (so the
view gets past its 404 and reads the fields), else any integer, huge ones
included (someone else's, or nobody's); a `<str>` is one of the values the view
knows, or a random word.
"""

from __future__ import annotations

import json
import os
import string
from typing import Any

import pytest
from django.contrib import messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.urls import URLPattern, reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.urlconf import make_world, snapshot, urlconf_names

pytestmark = pytest.mark.django_db

# --------------------------------------------------------------------------- values

NASTY = [
    "", " ", "\x00", "a\x00b", "²", "٣", "-1", "0", "1", "3", "1e309", "-0", "nan", "NaN",
    "inf", "-inf", "9" * 400, "-9223372036854775809", "9223372036854775808",
    "18446744073709551616", "1.5", "3.0", "true", "on", "[]", "{}", "null", "\u202e",
    "x" * 3000, "<script>alert(1)</script>", "%00", "0x10", " 7 ", "\n", "\\n", "é",
    "🦉", "\ud7ff", "2026-02-30", "2026-01-01", "scripted", "next",
]  # fmt: skip

text = st.one_of(
    st.sampled_from(NASTY),
    st.text(max_size=40),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
# A field is usually one value, sometimes several (a list where one is expected).
value = st.one_of(text, text, text, st.lists(text, min_size=2, max_size=3))

json_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(NASTY)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
node_field = st.sampled_from(
    ["id", "parent_id", "text", "author", "position", "seed", "checkpoint", "request_id",
     "finish_reason", "logprobs", "params", "tags", "extra", "visited_at", "created_at",
     "children", "meta", "generation", "patch", "parent", "content", "parentId"]
)  # fmt: skip
node = st.dictionaries(node_field, json_value, max_size=6)


@st.composite
def tree_file(draw) -> tuple[str, bytes]:
    """A file in one of the import formats with odd values, or plain junk."""
    nodes = draw(st.lists(node, max_size=4))
    kind = draw(st.sampled_from(["weft", "pyloom", "mini", "exo", "sidian", "jsonl", "bytes"]))
    if kind == "weft":
        doc: Any = {"format": "weft-loom", "version": draw(st.sampled_from([1, 1, 2, "1"])),
                    "tree": draw(st.dictionaries(st.sampled_from(["title", "current", "settings",
                                                                  "extra"]), json_value)),
                    "nodes": [{"id": 1, "parent_id": None, "text": "r"}, *nodes]}  # fmt: skip
    elif kind == "pyloom":
        doc = {"root": {"id": "r", "text": "root", "children": nodes}}
    elif kind == "mini":
        doc = {"loomTree": {"nodeStore": {str(i): n for i, n in enumerate(nodes)}}}
    elif kind == "exo":
        doc = {
            "loomType": "Exoloom",
            "tree": {"rootNodeId": "0", "nodes": {str(i): n for i, n in enumerate(nodes)}},
        }
    elif kind == "sidian":
        doc = {"state": {draw(text) or "n.md": {"nodes": {str(i): n for i, n in enumerate(nodes)}}}}
    elif kind == "jsonl":
        lines = [json.dumps({"id": 1, "parent_id": None, "text": "r"})]
        lines += [json.dumps(n, allow_nan=True) for n in nodes] + [draw(text)]
        return "t.nodes.jsonl", "\n".join(lines).encode("utf-8", "surrogatepass")
    else:
        return draw(st.sampled_from(["x.json", "x", "x.jsonl"])), draw(st.binary(max_size=300))
    raw = json.dumps(doc, allow_nan=True, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):  # cut it somewhere
        raw = raw[: draw(st.integers(0, len(raw)))]
    return draw(st.sampled_from(["t.json", "t.pyloom.json", "data.json"])), raw.encode(
        "utf-8", "surrogatepass"
    )


# --------------------------------------------------------------------------- endpoints

PARAMS = ["model", "prompt", "max_tokens", "n", "temperature", "top_p", "top_k", "min_p",
          "presence_penalty", "frequency_penalty", "repetition_penalty", "seed", "logprobs",
          "echo", "echo__present", "add_special_tokens", "stop_1", "stop_2"]  # fmt: skip
LOOM_GEN = ["n", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "logprobs",
            "model", "models", "stop_1", "stop_2", "save_defaults"]  # fmt: skip
ACTIONS = ["edit", "child", "split", "merge", "move", "delete", "bookmark", "archive", "tag",
           "untag", "alternative", "expand", "hoist", "unhoist", "rate"]  # fmt: skip
NODE_FIELDS = ["text", "as_sibling", "offset", "focus", "target", "tag", "index", "token", "value"]
FILTERS = ["q", "model", "since", "until", "page"]

# url name -> (method, fields it reads). "FILE" marks the upload field.
FORMS: dict[str, tuple[str, list[str]]] = {
    "home": ("GET", []),
    "workbench": ("GET", ["prompt", "run", "generation"]),
    "wb_check": ("POST", PARAMS),
    "wb_run": ("POST", PARAMS),
    "wb_code": ("POST", PARAMS),
    "wb_loom": ("POST", PARAMS),
    "wb_save": ("POST", ["title", "note", "choice", "choices_present"]),
    "wb_draft": ("POST", [*PARAMS, "show"]),
    "wb_compare": ("GET", ["a", "b"]),
    "wb_rerun_generation": ("POST", []),
    "wb_dismiss": ("POST", []),
    "wb_preset_save": ("POST", ["preset_name", *PARAMS]),
    "wb_preset_load": ("GET", []),
    "wb_preset_delete": ("POST", []),
    "wb_prompt_save": ("POST", ["prompt_name", *PARAMS]),
    "wb_prompt_delete": ("POST", []),
    "history": ("GET", FILTERS),
    "wb_recover": ("GET", ["page"]),
    "wb_export": ("GET", FILTERS),
    "wb_run_detail": ("GET", []),
    "wb_rerun": ("POST", []),
    "wb_run_delete": ("POST", []),
    "wb_run_export": ("GET", []),
    "usage": ("GET", []),
    "generation_result": ("GET", []),
    "generation_cancel": ("POST", []),
    "inspect": ("GET", []),
    "inspect_score": (
        "POST",
        ["model", "source", "text", "token_ids", "k", "full_vocab", "add_special_tokens"],
    ),  # fmt: skip
    "inspect_choices": ("POST", ["model", "prefix", "candidates", "add_special_tokens"]),
    "inspect_compare": (
        "POST",
        ["model", "model_b", "text", "prefix_a", "prefix_b", "add_special_tokens"],
    ),  # fmt: skip
    "inspect_result": ("GET", []),
    "inspect_export": ("GET", []),
    "inspect_save": ("POST", ["title"]),
    "loom:trees": ("POST", ["prompt", "title", "q", "whole"]),
    "loom:trees#search": ("GET", ["q", "whole"]),
    "loom:import": ("POST", ["FILE"]),
    "loom:recover": ("POST", ["generation", "tree", "node"]),
    "loom:recover#page": ("GET", []),
    "loom:depths": ("GET", []),
    "loom:tree": ("GET", []),
    "loom:rename": ("POST", ["title"]),
    "loom:duplicate": ("POST", []),
    "loom:delete": ("POST", []),
    "loom:undo": ("POST", []),
    "loom:redo": ("POST", []),
    "loom:write_mode": ("POST", ["mode"]),
    "loom:write": ("POST", ["edits", "append", "generate", *LOOM_GEN]),
    "loom:search": ("GET", ["q", "whole"]),
    "loom:export": ("GET", ["node"]),
    "loom:node": ("GET", []),
    "loom:generate": ("POST", [*LOOM_GEN, "memory", "note", "note_depth", "note_unit"]),
    "loom:path": ("GET", []),
    "loom:live": ("GET", []),
    "loom:read": ("GET", []),
    "loom:grow": (
        "POST",
        [*LOOM_GEN, "depth", "breadth", "keep", "memory", "note", "note_depth", "note_unit"],
    ),
    "loom:expansion": ("GET", ["node", "seen"]),
    "loom:expansion_cancel": ("POST", []),
    "loom:outline_children": ("GET", ["level"]),
    "loom:graph": ("GET", []),
    "loom:graph_data": ("GET", []),
    "loom:bookmark_step": ("GET", []),
    "loom:show_archived": ("POST", []),
    "loom:child_order": ("POST", ["order", "hide_down"]),
    "loom:context": ("POST", ["memory", "note", "note_depth", "note_unit"]),
    "loom:code": ("POST", [*LOOM_GEN, "memory", "note", "note_depth", "note_unit"]),
    "loom:action": ("POST", NODE_FIELDS),
    "loom:share": ("GET", []),
    "loom:share_add": ("POST", ["username", "role"]),
    "loom:share_revoke": ("POST", []),
    "loom:share_link": ("POST", ["on"]),
    "loom:link": ("GET", []),
    "api_keys": ("POST", ["name"]),
    "batch:list": ("GET", []),
    "batch:new": ("POST", ["FILE", "format", "title", *PARAMS]),
    "batch:detail": ("GET", ["page", "failed", "length", "mean_logprob"]),
    "batch:results": ("GET", ["page", "failed", "length", "mean_logprob"]),
    "batch:export": ("GET", []),
    "batch:delete": ("POST", []),
    "batch:control": ("POST", []),
    "batch:item_retry": ("POST", []),
    "batch:item_workbench": ("GET", []),
    "batch:item_loom": ("POST", []),
    "feedback_list": ("GET", []),
    "feedback_new": ("POST", ["message", "page_url", "reported_at", "request_id"]),
    "feedback_new#form": ("GET", ["page"]),
    "feedback_detail": ("GET", []),
    "budget_request": ("POST", ["key", "amount", "reason"]),
    "budget_request#form": ("GET", ["key", "asked", "left"]),
    "budget_request_withdraw": ("POST", []),
    "api_key_revoke": ("POST", ["confirm"]),
    "plain_view": ("POST", ["plain", "next"]),
}
NOT_FUZZED = {
    "health": "public, takes no input",
    "ready": "public, takes no input",
    "metrics": "takes no input (localhost or a token: tests/api/test_it_counts_metrics_from_every_process.py)",
    "login": "Django's own form, before login",
    "logout": "Django's own view, takes no input",
    "openapi_json": "public, takes no input (schemathesis covers the API it describes)",
    "swagger": "public, takes no input",
}
# Choices for <str:…> path parts; a random word is drawn too.
STR_VALUES = {
    "fmt": [
        "csv",
        "spreadsheet.csv",
        "jsonl",
        "json",
        "weft",
        "pyloom",
        "txt",
        "md",
        "loomsidian",
        "exoloom",
        "miniloom",
    ],
    "action": ACTIONS,
    "direction": ["next", "prev"],
    "control": ["pause", "resume", "cancel", "retry"],
}


def test_it_knows_every_url():
    names = set(urlconf_names())
    described = {name.split("#")[0] for name in FORMS}
    assert names - described - set(NOT_FUZZED) == set(), "add the new URL to FORMS"
    assert described - names == set(), "FORMS names a URL that no longer exists"


# --------------------------------------------------------------------------- the world


@pytest.fixture(scope="module")
def engine():
    from engine.testing import run_engine

    with run_engine("scripted") as base:
        yield base


@pytest.fixture
def world(engine, settings, make_user):
    """A user owning one of everything a path id can name."""
    settings.WEFT_BACKEND_URL = f"{engine}/v1"
    settings.WEFT_GENERATION_QUEUE = "weft-fuzz-nobody-listens"
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    return make_world(make_user())


def refused(response) -> bool:
    if response.status_code >= 400:
        return True
    storage = getattr(response.wsgi_request, "_messages", None)
    queued = getattr(storage, "_queued_messages", []) or []
    if any(m.level >= messages.ERROR for m in queued):
        return True
    content = getattr(response, "content", b"")
    return b'role="alert"' in content or b"Not saved" in content


def path_for(name: str, pattern: URLPattern, ids: dict, draw) -> str:
    kwargs = {}
    for key, converter in pattern.pattern.converters.items():
        kind = type(converter).__name__
        if kind == "IntConverter":
            own = ids.get(key)
            own = draw(st.sampled_from(own)) if isinstance(own, list) else own
            kwargs[key] = draw(
                st.one_of(
                    st.just(own if own is not None else 1),
                    st.just(own if own is not None else 1),
                    st.integers(min_value=0, max_value=2**70),
                )
            )
        else:
            word = st.text(string.ascii_letters + string.digits + "-_.~", min_size=1, max_size=8)
            kwargs[key] = draw(st.one_of(st.sampled_from(STR_VALUES.get(key, ["x"])), word))
    return reverse(name, kwargs=kwargs)


@st.composite
def request_for(draw, name: str, ids: dict) -> tuple[str, str, dict]:
    method, fields = FORMS[name]
    url_name = name.split("#")[0]
    url = path_for(url_name, urlconf_names()[url_name], ids, draw)
    data: dict[str, Any] = {}
    for field in fields:
        if field == "FILE":
            if draw(st.integers(0, 9)):
                filename, content = draw(tree_file())
                data["file"] = SimpleUploadedFile(filename, content)
            continue
        if draw(st.integers(0, 3)):  # mostly present, sometimes left out
            data[field] = draw(value)
    return method, url, data


def check(world, method: str, url: str, data: dict, htmx: bool) -> None:
    client, user = world["client"], world["user"]
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    with transaction.atomic():
        before = snapshot(user)
        response = getattr(client, method.lower())(url, data, **headers)
        after = snapshot(user)
        transaction.set_rollback(True)  # every example starts from the same world
    assert response.status_code < 500, (method, url, data, response.status_code)
    if refused(response):
        assert after == before, ("refused but changed", method, url, data, response.status_code)


FUZZ = settings(
    max_examples=int(os.environ.get("WEFT_FUZZ_EXAMPLES", "15")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large, HealthCheck.filter_too_much],
)  # fmt: skip


@pytest.mark.parametrize("name", [n for n in FORMS if n != "loom:import"])
@FUZZ
@given(data=st.data(), htmx=st.booleans())
def test_it_answers_every_form_without_a_server_error(world, name, data, htmx):
    method, url, fields = data.draw(request_for(name, world["ids"]), label="request")
    check(world, method, url, fields, htmx)


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_it_imports_or_refuses_any_file_cleanly(world, data):
    method, url, fields = data.draw(request_for("loom:import", world["ids"]), label="request")
    check(world, method, url, fields, htmx=False)
