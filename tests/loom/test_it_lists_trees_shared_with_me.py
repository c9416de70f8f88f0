"""The Loom's tree list has a "Shared with me" section: each tree shared with me or
opened by its link, with its owner's name and my role; the search over trees finds
their text too, and never a tree I cannot see."""

import pytest

from loom import access
from loom.models import Tree

pytestmark = pytest.mark.django_db


def test_it_lists_trees_shared_with_me(client, make_user, make_tree):
    me, ann, bob = make_user("me"), make_user("ann"), make_user("bob")
    mine = make_tree(me, prompt="my own zebra", title="Mine")
    edited = make_tree(ann, prompt="ann's zebra", title="Ann's draft")
    viewed = make_tree(bob, prompt="bob's zebra", title="Bob's notes")
    linked = make_tree(bob, prompt="bob's linked zebra", title="Bob's link")
    hidden = make_tree(bob, prompt="bob's secret zebra", title="Bob's secret")
    access.share(edited, me, "editor")
    access.share(viewed, me, "viewer")
    access.set_link(linked, True)
    access.open_link(me, Tree.objects.get(pk=linked.pk).link_token)
    access.set_link(hidden, True)  # on, but I never opened it

    client.force_login(me)
    page = client.get("/loom/")
    rows = {t.title: (t.owner.username, t.role) for t, _stat in page.context["shared"]}
    assert rows == {
        "Ann's draft": ("ann", "editor"),
        "Bob's notes": ("bob", "viewer"),
        "Bob's link": ("bob", "viewer"),
    }
    shared = page.text[page.text.index('id="shared-h"') :]
    assert "Ann&#x27;s draft" in shared and "<td>ann</td>" in shared and "<td>editor</td>" in shared
    assert "viewer, via link" in shared and "Bob&#x27;s secret" not in page.text
    assert [t.title for t, _ in page.context["trees"]] == ["Mine"]

    found = client.get("/loom/?q=zebra").text
    for tree in (mine, edited, viewed, linked):
        assert f"/loom/{tree.pk}/n/{tree.root.pk}/" in found
    assert f"/loom/{hidden.pk}/" not in found and "secret" not in found
    # The depths come for every listed tree.
    depths = client.get("/loom/depths/").text
    assert all(f'id="depth-{t.pk}"' in depths for t in (mine, edited, viewed, linked))
    assert f'id="depth-{hidden.pk}"' not in depths
