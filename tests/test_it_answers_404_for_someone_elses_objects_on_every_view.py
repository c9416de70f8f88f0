"""Every view that takes an object id in its path answers 404 to a user who does not
own that object — page, fragment, export, action alike — and changes nothing.
In-process (Django's test client), so the browser suite need not check ownership.

The views come from the URLconf (tests/urlconf.py, shared with the input fuzzer):
a new view with an <int:…> id is checked without being listed anywhere, and its
method comes from the fuzzer's FORMS table, which already fails for a URL it does
not describe."""

from __future__ import annotations

import itertools

import pytest
from django.test import Client
from django.urls import reverse

from tests.test_it_survives_generated_input_on_every_form import FORMS, STR_VALUES
from tests.urlconf import make_world, snapshot, urlconf_names

pytestmark = pytest.mark.django_db


def _with_ids() -> list[str]:
    return sorted(
        name
        for name, pattern in urlconf_names().items()
        if any(type(c).__name__ == "IntConverter" for c in pattern.pattern.converters.values())
    )


WITH_IDS = _with_ids()


def _urls(name: str, ids: dict) -> list[str]:
    """The view's URL for each of the owner's objects it could name (and each word a
    <str:…> part takes: formats, actions, directions)."""
    converters = urlconf_names()[name].pattern.converters
    choices = []
    for key, converter in converters.items():
        if type(converter).__name__ == "IntConverter":
            own = ids[key]
            choices.append([(key, i) for i in (own if isinstance(own, list) else [own])])
        else:
            choices.append([(key, word) for word in STR_VALUES.get(key, ["x"])])
    return [reverse(name, kwargs=dict(combo)) for combo in itertools.product(*choices)]


def test_it_checks_every_view_that_takes_an_id():
    assert len(WITH_IDS) >= 25  # the project's views with ids, at the time of writing
    assert {"wb_save", "loom:action", "inspect_export", "generation_cancel"} <= set(WITH_IDS)


@pytest.mark.parametrize("name", WITH_IDS)
def test_it_answers_404_for_someone_elses_object(name, make_user, settings):
    settings.WEFT_GENERATION_QUEUE = "weft-nobody-listens"
    world = make_world(make_user())
    intruder = Client(raise_request_exception=False)
    intruder.force_login(make_user())
    method = FORMS[name][0].lower()
    before = snapshot(world["user"])
    for url in _urls(name, world["ids"]):
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            response = getattr(intruder, method)(url, **headers)
            assert response.status_code == 404, (method, url, response.status_code)
    assert snapshot(world["user"]) == before
    # The owner reaches the same view (so the 404 is about ownership, not the URL).
    owner = world["client"]
    codes = [getattr(owner, method)(url).status_code for url in _urls(name, world["ids"])]
    assert any(code != 404 for code in codes), (name, codes)
