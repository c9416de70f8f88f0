"""The Workbench, the Loom's generation settings and Inspect share one parameter form
(completions.forms): a value that is not a number ("abc", "1e"), or one out of the
schema's bounds, is an error next to its field — never dropped so the run goes out
without it — every error shows at once, and nothing is sent."""

from __future__ import annotations

import pytest

from completions.models import Generation
from loom.models import Tree
from tests import params_pages
from tests.params_pages import error_next_to, post_inspect, post_loom, post_workbench, sent

pytestmark = pytest.mark.django_db
scripted_url, scripted = params_pages.scripted_url, params_pages.scripted  # fixtures

BAD = [
    ("max_tokens", "abc", "'abc' is not an integer"),
    ("temperature", "1e", "'1e' is not a number"),
    ("temperature", "nan", "'nan' is not a number"),
    ("n", "2.5", "'2.5' is not an integer"),
    ("temperature", "101", "must be less than or equal to 100"),
    ("top_p", "0", "must be greater than 0"),
    ("n", "17", "must be less than or equal to 16"),
]


@pytest.fixture
def user_client(client, make_user):
    user = make_user()
    client.force_login(user)
    client.user = user
    return client


@pytest.mark.parametrize("field, raw, message", BAD)
def test_it_refuses_a_bad_value_on_the_workbench(user_client, scripted, field, raw, message):
    html = post_workbench(user_client, {field: raw})
    assert message in error_next_to("workbench", html, field)
    assert "Nothing was sent" in html
    assert not Generation.objects.exists() and sent(scripted) == []


@pytest.mark.parametrize("field, raw, message", BAD)
def test_it_refuses_a_bad_value_on_the_loom(user_client, scripted, field, raw, message):
    tree = Tree.objects.create_from_prompt(user_client.user, "Once")
    html = post_loom(user_client, tree, {field: raw, "save_defaults": "on"})
    assert message in error_next_to("loom", html, field)
    assert "Nothing was sent" in html
    assert not Generation.objects.exists() and sent(scripted) == []
    tree.refresh_from_db()
    assert tree.settings == {}  # not saved as defaults either


@pytest.mark.parametrize(
    "raw, message",
    [("abc", "'abc' is not an integer"), ("1e", "'1e' is not an integer"),
     ("-1", "must be greater than or equal to 0"), ("", "required"),
     ("21", "must be at most 20 for model scripted")],
)  # fmt: skip
def test_it_refuses_a_bad_k_on_inspect(user_client, scripted, raw, message):
    html = post_inspect(user_client, {"k": raw})
    assert message in error_next_to("inspect", html, "k")
    assert not Generation.objects.exists() and sent(scripted) == []


def test_it_shows_every_error_at_once(user_client, scripted):
    bad = {"max_tokens": "abc", "temperature": "1e", "top_p": "5", "top_k": "0"}
    html = post_workbench(user_client, bad)
    assert "not an integer" in error_next_to("workbench", html, "max_tokens")
    assert "not a number" in error_next_to("workbench", html, "temperature")
    assert "less than or equal to 1" in error_next_to("workbench", html, "top_p")
    assert "-1 (disabled) or at least 1" in error_next_to("workbench", html, "top_k")  # the door's
    assert error_next_to("workbench", html, "n") == ""

    tree = Tree.objects.create_from_prompt(user_client.user, "Once")
    html = post_loom(user_client, tree, bad)
    assert "not an integer" in error_next_to("loom", html, "max_tokens")
    assert "not a number" in error_next_to("loom", html, "temperature")
    assert "less than or equal to 1" in error_next_to("loom", html, "top_p")
    assert "-1 (disabled) or at least 1" in error_next_to("loom", html, "top_k")
    assert error_next_to("loom", html, "n") == ""

    html = post_inspect(user_client, {"k": "abc", "text": "", "add_special_tokens": ""})
    assert "not an integer" in error_next_to("inspect", html, "k")
    assert "Empty text" in error_next_to("inspect", html, "text")
    assert not Generation.objects.exists() and sent(scripted) == []


def test_it_renders_inputs_that_send_what_was_typed(user_client, scripted):
    """A type="number" input sends "" for "abc": the value would vanish before the
    server could refuse it."""
    tree = Tree.objects.create_from_prompt(user_client.user, "Once")
    pages = [
        user_client.get("/workbench/").text,
        user_client.get(f"/loom/{tree.pk}/", follow=True).text,
        user_client.get("/inspect/").text,
    ]
    for html in pages:
        assert 'name="temperature"' in html or 'name="k"' in html
        assert 'type="number"' not in html
    assert 'name="max_tokens" value="64" type="text" inputmode="numeric"' in pages[0]
    assert 'type="text" name="k" value="5" inputmode="numeric"' in pages[2]
