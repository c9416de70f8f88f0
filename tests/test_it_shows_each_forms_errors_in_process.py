"""Every view that reads a form refuses bad input with a message the user can act on,
in-process (Django's test client): no browser is needed to see a refusal, so the
browser suite keeps to what needs one (typing pauses, keyboard, popovers, sockets).

Each case posts (or gets) one bad form as the owner of everything (tests/urlconf.py)
and checks: no server error, the message is in the page the user lands on, the user's
data is exactly as before, and nothing reached the backend. `test_it_covers_every_form`
fails when a view of the fuzzer's FORMS table that reads fields is neither a case here
nor named with the test file that covers its errors (or the reason it has none)."""

from __future__ import annotations

from html import unescape
from pathlib import Path

import pytest
from django.urls import reverse

from tests import params_pages
from tests.params_pages import sent
from tests.test_it_survives_generated_input_on_every_form import FORMS
from tests.urlconf import make_world, snapshot

pytestmark = pytest.mark.django_db
scripted_url, scripted = params_pages.scripted_url, params_pages.scripted  # fixtures

TESTS = Path(__file__).resolve().parent
CHOICES = {"model": "scripted", "prefix": "The owl", "add_special_tokens": "on"}
COMPARE = {"model": "scripted", "model_b": "scripted", "text": " sang", "prefix_a": "A",
           "prefix_b": "B", "add_special_tokens": "on"}  # fmt: skip
PARAMS = {"model": "scripted", "prompt": "Once", "max_tokens": "8"}

# (url name, path kwargs (None: the world's own object), fields, what the page then says)
CASES: list[tuple[str, dict, dict, str]] = [
    ("api_keys", {}, {"name": ""}, "This field is required."),
    ("api_keys", {}, {"name": "k" * 101}, "at most 100 characters"),
    ("wb_code", {}, {**PARAMS, "temperature": "abc"}, "'abc' is not a number"),
    ("wb_loom", {}, {**PARAMS, "max_tokens": "1e"}, "'1e' is not an integer"),
    ("wb_preset_save", {}, {"preset_name": ""}, "Name the preset first."),
    ("wb_preset_save", {}, {"preset_name": "hot", "temperature": "abc"}, "Not saved:"),
    ("wb_preset_save", {}, {"preset_name": "p" * 101}, "at most 100 characters"),
    ("wb_prompt_save", {}, {"prompt_name": ""}, "Name the prompt first."),
    ("wb_prompt_save", {}, {"prompt_name": "s", "top_p": "0"}, "must be greater than 0"),
    ("wb_save", {"generation_id": 0}, {"title": "t" * 201, "choice": "0"}, "at most 200"),
    ("wb_save", {"generation_id": 0}, {"choice": "7"}, "Select a valid choice"),
    ("history", {}, {"since": "2026-02-30"}, "Enter a valid date."),
    ("workbench", {}, {"run": "abc"}, "404"),
    ("inspect_choices", {}, {**CHOICES, "candidates": " sang"}, "at least two candidates"),
    (
        "inspect_choices",
        {},
        {**CHOICES, "candidates": "\n".join("abcdefghijklmnopq")},
        "At most 16 candidates (17 given).",
    ),  # fmt: skip
    (
        "inspect_choices",
        {},
        {**CHOICES, "model": "nope", "candidates": "a\nb"},
        "Select a valid choice",
    ),  # fmt: skip
    (
        "inspect_compare",
        {},
        {**COMPARE, "prefix_b": "A"},
        "Compare needs two different models or two different prefixes.",
    ),  # fmt: skip
    ("inspect_compare", {}, {**COMPARE, "text": ""}, "This field is required."),
    ("loom:trees", {}, {"prompt": "   "}, "Write a prompt to start a tree from."),
    ("loom:rename", {"tree_id": None}, {"title": ""}, "This field is required."),
    (
        "loom:action",
        {"tree_id": None, "node_id": None, "action": "split"},
        {"offset": "abc"},
        "offset must be a whole number.",
    ),  # fmt: skip
    (
        "loom:action",
        {"tree_id": None, "node_id": None, "action": "move"},
        {"target": "999999999"},
        "There is no node with that number in this tree.",
    ),  # fmt: skip
    (
        "loom:write_mode",
        {"tree_id": None},
        {"mode": "nope"},
        "Not changed: mode: Select a valid choice",
    ),
    (
        "loom:write",
        {"tree_id": None, "node_id": None},
        {"edits": "[{"},
        "The edits could not be read; reload the page.",
    ),  # fmt: skip
    (
        "loom:write",
        {"tree_id": None, "node_id": None},
        {"append": ""},
        "Nothing changed in the text.",
    ),
    (
        "loom:share_add",
        {"tree_id": None},
        {"username": "nobody-by-that-name", "role": "editor"},
        "There is no user called “nobody-by-that-name” on this Weft.",
    ),
    ("loom:share_add", {"tree_id": None}, {"username": "x", "role": "admin"}, "Not shared:"),
    ("loom:share_link", {"tree_id": None}, {"on": "2"}, "Turn the link on or off."),
    (
        "loom:context",
        {"tree_id": None},
        {"memory": "M", "note": "N", "note_depth": "-1", "note_unit": "newlines"},
        "Not saved: note_depth: Ensure this value is greater than or equal to 0.",
    ),
    (
        "loom:code",
        {"tree_id": None, "node_id": None},
        {"temperature": "abc"},
        "'abc' is not a number",
    ),
    (
        "loom:grow",
        {"tree_id": None, "node_id": None},
        {"model": "scripted", "depth": "0", "breadth": "3"},
        "Not expanded: depth: Ensure this value is greater than or equal to 1.",
    ),
    (
        "loom:child_order",
        {"tree_id": None, "node_id": None},
        {"order": "alphabet"},
        "Not changed: order: Select a valid choice",
    ),
    (
        "loom:action",
        {"tree_id": None, "node_id": None, "action": "rate"},
        {"value": "sideways"},
        "Rate a node up, down or none.",
    ),
    ("batch:new", {}, {"format": "auto", "title": "t"}, "Choose a file of prompts"),
    ("batch:new", {}, {"temperature": "abc"}, "'abc' is not a number"),
    ("feedback_new", {}, {"message": "", "page_url": "/x"}, "This field is required."),
    (
        "feedback_new",
        {},
        {"message": "hi", "reported_at": "2026-02-30 10:00"},
        "Enter a valid date/time.",
    ),
    ("budget_request", {}, {"amount": "0", "reason": "more"}, "greater than or equal to 1"),
    ("budget_request", {}, {"amount": "abc", "reason": "more"}, "Enter a whole number."),
    ("budget_request", {}, {"amount": "1000", "reason": ""}, "This field is required."),
]

# Views that read fields whose refusals other files test, or that have none to show.
COVERED = {
    "wb_check": "workbench/test_it_counts_prompt_tokens_and_checks_fields.py",
    "wb_run": "test_it_refuses_unparseable_parameters_on_every_page.py",
    "loom:generate": "test_it_refuses_unparseable_parameters_on_every_page.py",
    "inspect_score": "inspector/test_it_refuses_invalid_input_before_sending.py",
    "inspect_save": "inspector/test_it_refuses_an_unstorable_title_when_saving.py",
    "loom:import": "loom/test_it_refuses_bad_imports.py",
    "loom:recover": "loom/test_it_attaches_only_finished_generations.py",
    "loom:trees#search": "loom/test_it_refuses_unstorable_input_with_a_message.py",
    "loom:search": "loom/test_it_refuses_unstorable_input_with_a_message.py",
    "loom:export": "loom/test_it_refuses_unstorable_input_with_a_message.py",
    "wb_draft": "workbench/test_it_keeps_the_draft_on_the_server.py",
}
NO_ERRORS = {
    "wb_recover": "an odd page number shows the nearest page (Django's Paginator.get_page)",
    "wb_export": "History's filters: an invalid one filters nothing, the page says why",
    "wb_compare": "two run ids in the query: someone else's or nonsense is a 404",
    "loom:outline_children": "a level that is not a small whole number opens at the first level",
    "batch:detail": "an odd page number shows the nearest page; `failed` is a flag, any value is on;"
    " a histogram filter that cannot be read: batch/test_it_filters_results_by_a_histogram_bin.py",
    "batch:results": "the detail page's table alone: the same page number and flag as batch:detail",
    "feedback_new#form": "the form itself: `page` is any text, shown (cut to 2,000) for the user to edit",
    "budget_request#form": "the form: someone else's or a malformed key is a 404, asked/left only suggest",
    "api_key_revoke": "confirm is a flag: without it the page asks first (api/test_it_revokes_a_key.py)",
    "plain_view": "plain is a flag (any other value is off); next is only followed to this site",
    "loom:expansion": "node and seen only pick what to re-render; a node not in the tree shows none",
}


def test_it_covers_every_form():
    reads_fields = {name for name, (_, fields) in FORMS.items() if fields}
    cased = {case[0] for case in CASES}
    assert reads_fields - cased - set(COVERED) - set(NO_ERRORS) == set(), "add a case"
    for path in COVERED.values():
        assert (TESTS / path).is_file(), path


def _url(name: str, kwargs: dict, ids: dict) -> str:
    """None stands for the world's own tree or node; generation_id indexes its list."""
    own = {"tree_id": ids["tree_id"], "node_id": ids["node_id"]}
    resolved = {
        key: ids[key][value] if key == "generation_id" else own[key] if value is None else value
        for key, value in kwargs.items()
    }
    return reverse(name, kwargs=resolved)


@pytest.mark.parametrize(
    "name, kwargs, fields, message",
    CASES,
    ids=[f"{c[0]}-{'-'.join(c[2])[:40]}" for c in CASES],
)
@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_it_refuses_a_bad_form_with_a_message(
    name, kwargs, fields, message, htmx, scripted, make_user, settings
):
    settings.WEFT_GENERATION_QUEUE = "weft-nobody-listens"
    world = make_world(make_user())
    client, user = world["client"], world["user"]
    method = FORMS[name][0].lower()
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    before = snapshot(user)
    response = getattr(client, method)(
        _url(name, kwargs, world["ids"]), fields, follow=True, **headers
    )
    if message == "404":
        assert response.status_code == 404
    else:
        assert response.status_code < 500, response.status_code
        assert message in unescape(response.text), response.text[-3000:]
    assert snapshot(user) == before
    assert sent(scripted) == []
