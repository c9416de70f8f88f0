"""Stop strings are typed in one-line inputs on the Workbench and in the Loom's
generation settings, with one rule for both (completions.forms): \\n and \\t stand for
a newline and a tab, \\\\ for a backslash; and a stored stop is shown back escaped the
same way. (Inspect sends no stop strings: its recipe generates one token.)"""

from __future__ import annotations

import pytest

from completions.forms import escape_stop, unescape_stop
from completions.models import Generation
from loom.models import Tree
from tests import params_pages
from tests.params_pages import post_loom, post_workbench

pytestmark = pytest.mark.django_db
scripted_url, scripted = params_pages.scripted_url, params_pages.scripted  # fixtures

TYPED = {"stop_1": r"a\nb", "stop_2": r"\\n", "stop_3": "\\t", "stop_4": r"c\x"}
MEANT = ["a\nb", "\\n", "\t", "c\\x"]


def test_it_unescapes_and_escapes_back():
    assert [unescape_stop(TYPED[f"stop_{i}"]) for i in range(1, 5)] == MEANT
    assert [unescape_stop(escape_stop(s)) for s in MEANT] == MEANT


def test_it_sends_the_same_stop_strings_from_both_pages(client, make_user, scripted):
    user = make_user()
    client.force_login(user)
    post_workbench(client, TYPED)
    tree = Tree.objects.create_from_prompt(user, "Once")
    post_loom(client, tree, {**TYPED, "save_defaults": "on"})
    workbench, loom = Generation.objects.order_by("pk")
    assert workbench.params["stop"] == MEANT
    assert loom.params["stop"] == MEANT

    # Shown back the way they were typed.
    again = client.get(f"/workbench/?generation={workbench.pk}").text
    tree.refresh_from_db()
    assert tree.settings["stop"] == MEANT
    page = client.get(f"/loom/{tree.pk}/", follow=True).text
    for html in (again, page):
        assert 'name="stop_1" value="a\\nb"' in html
        assert 'name="stop_2" value="\\\\n"' in html
        assert 'name="stop_3" value="\\t"' in html
