"""A finished generation whose result no page fetched (two generations ending close
together, or the browser closed) becomes children when the reader next opens its
node; an undone (detached) one and someone else's stay where they are."""

import pytest

from completions.models import Generation
from loom.models import Node

pytestmark = pytest.mark.django_db


def finished(user, tree, text, **target):
    return Generation.objects.create(
        owner=user, kind="loom", params={"prompt": "Root", "n": 1}, state="done",
        target={"tree": tree.pk, "parent": tree.root.pk, **target},
        choices=[{"index": 0, "text": text}],
    )  # fmt: skip


def test_it_attaches_what_no_page_fetched(client, make_tree):
    tree = make_tree(prompt="Root")
    first = finished(tree.owner, tree, " one")
    second = finished(tree.owner, tree, " two")
    client.force_login(tree.owner)
    page = client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/")
    assert page.status_code == 200
    assert sorted(n.text for n in tree.root.children()) == [" one", " two"]
    assert " one" in page.text and " two" in page.text
    for g in (first, second):
        g.refresh_from_db()
        assert g.claimed_at is not None
    client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/")  # once only
    assert tree.root.children().count() == 2


def test_it_leaves_detached_and_others_generations_alone(client, make_tree, make_user):
    tree = make_tree(prompt="Root")
    undone = finished(tree.owner, tree, " undone", detached=True)
    stranger = make_user("stranger")
    theirs = finished(stranger, tree, " theirs")
    client.force_login(tree.owner)
    assert client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/").status_code == 200
    assert Node.objects.filter(tree=tree).count() == 1
    for g in (undone, theirs):
        g.refresh_from_db()
        assert g.claimed_at is None
