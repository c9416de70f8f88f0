"""The Cancel button shown while a generation streams into placeholders posts
to the door's cancel view: the run stops early and the text so far becomes
children; another user cannot cancel it."""

import re

import pytest

from loom.models import Node
from tests.loom.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_cancels_a_streaming_generation(loom_stack, backend, client, make_user, make_tree):
    from completions.models import Generation

    user = make_user()
    tree = make_tree(user, prompt="A long story:")
    client.force_login(user)
    response = client.post(
        f"/loom/{tree.pk}/n/{tree.root.pk}/generate/",
        {"n": "2", "max_tokens": "600", "seed": "3"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200, response.text
    g = Generation.objects.get(owner=user)
    button = re.search(rf'<button[^>]*id="gen-{g.pk}-cancel"[^>]*>Cancel</button>', response.text)
    assert button, response.text
    url = re.search(r'hx-post="([^"]+)"', button.group(0)).group(1)
    assert url == f"/generations/{g.pk}/cancel/" and 'hx-swap="none"' in button.group(0)

    wait_for(
        lambda: any(c.get("text") for c in Generation.objects.get(pk=g.pk).choices or []),
        what="some streamed text",
    )
    intruder = client_for(make_user("intruder"))
    assert intruder.post(url, HTTP_HX_REQUEST="true").status_code == 404
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 204

    wait_for(lambda: Generation.objects.get(pk=g.pk).is_terminal, what="the run to stop")
    g.refresh_from_db()
    assert g.state == "cancelled" and g.charged_tokens < 2 * 600
    # What streamed before Cancel is kept as children (the worker attaches it).
    kids = wait_for(lambda: list(tree.root.children()), what="partial children")
    texts = sorted(c["text"] for c in g.choices if c.get("text"))
    assert sorted(k.text for k in kids) == texts and all(k.author == "model" for k in kids)
    assert Node.objects.filter(tree=tree).count() == 1 + len(texts)


def client_for(user):
    from django.test import Client

    other = Client()
    other.force_login(user)
    return other
