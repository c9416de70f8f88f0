"""With DEBUG off (as in production), a missing or foreign object gets the layout's
404 page, a server error the layout's 500 page, and every page links the favicon."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.test import RequestFactory
from django.views.defaults import server_error

pytestmark = pytest.mark.django_db


def test_it_shows_the_404_page_in_the_layout(client, make_user, settings):
    settings.DEBUG = False
    client.force_login(make_user())
    response = client.get("/workbench/presets/999999999/")
    assert response.status_code == 404
    html = response.text
    assert "<h1>Not found</h1>" in html
    assert 'class="topbar"' in html and 'aria-label="Main"' in html  # the layout, logged in
    assert "Traceback" not in html


def test_it_shows_the_500_page_without_a_request_context(settings):
    settings.DEBUG = False
    response = server_error(RequestFactory().get("/"))
    html = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in html and 'class="topbar"' in html


def test_it_links_the_favicon(client):
    html = client.get("/accounts/login/").text
    assert 'rel="icon" href="/static/weft/favicon.svg" type="image/svg+xml"' in html
    path = finders.find("weft/favicon.svg")
    assert path and open(path).read().lstrip().startswith("<svg")
