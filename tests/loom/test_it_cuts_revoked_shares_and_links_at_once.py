"""Revocation takes effect at once: the next request of a revoked editor, a downgraded
viewer or any holder of a link turned off is refused, and the tree's open sockets are
told (the tree consumer re-checks and closes them: loom/consumers.py)."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from loom.models import LinkGrant, Node, Tree

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def listen(tree_id: int):
    """A channel in the tree's group, and a way to read what reaches it."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(f"loom-tree-{tree_id}", channel)

    async def one():
        return await asyncio.wait_for(layer.receive(channel), 5)

    return lambda: async_to_sync(one)()


def test_it_cuts_shares_and_links_at_once(
    client, make_user, make_tree, django_capture_on_commit_callbacks
):
    owner, editor, holder, other = (make_user() for _ in range(4))
    tree = make_tree(owner, prompt="Shared text")
    child = tree.root.add_child(" child")
    heard = listen(tree.pk)
    client.force_login(owner)

    def as_owner(url, data):
        client.force_login(owner)
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(url, data, **HX)
        assert response.status_code == 200, response.text
        return response

    as_owner(f"/loom/{tree.pk}/share/add/", {"username": editor.username, "role": "editor"})
    assert heard() == {"type": "access.changed", "user_id": editor.pk}
    panel = as_owner(f"/loom/{tree.pk}/share/link/", {"on": "1"}).text
    token = Tree.objects.get(pk=tree.pk).link_token
    assert token and len(token) >= 32 and f"/loom/link/{token}/" in panel
    assert "Anyone signed in to this Weft who has the link can read this tree" in panel

    # Two users open the link: they read the tree (and it stays in their list).
    for user in (holder, other):
        client.force_login(user)
        assert client.get(f"/loom/link/{token}/").status_code == 302
        assert client.get(f"/loom/{tree.pk}/n/{child.pk}/").status_code == 200
    client.force_login(editor)
    assert client.post(f"/loom/{tree.pk}/n/{child.pk}/bookmark/", **HX).status_code == 200

    # Downgraded to viewer: the very next POST is a 403 and changes nothing.
    as_owner(f"/loom/{tree.pk}/share/add/", {"username": editor.username, "role": "viewer"})
    assert heard() == {"type": "access.changed", "user_id": editor.pk}
    client.force_login(editor)
    refused = client.post(f"/loom/{tree.pk}/n/{child.pk}/bookmark/", **HX)
    assert refused.status_code == 403 and "not change it" in refused.text
    assert Node.objects.get(pk=child.pk).bookmarked is True

    # The link turned off: every holder is cut at once, and the old link is dead.
    as_owner(f"/loom/{tree.pk}/share/link/", {"on": "0"})
    assert heard() == {"type": "access.changed", "user_id": None}
    assert not LinkGrant.objects.filter(tree=tree).exists()
    for user in (holder, other):
        client.force_login(user)
        assert client.get(f"/loom/{tree.pk}/n/{child.pk}/").status_code == 404
        assert client.get(f"/loom/link/{token}/").status_code == 404
        assert all(t.pk != tree.pk for t, _ in client.get("/loom/").context["shared"])
    # Turned on again it is a new link: the old one stays dead.
    as_owner(f"/loom/{tree.pk}/share/link/", {"on": "1"})
    assert Tree.objects.get(pk=tree.pk).link_token != token
    client.force_login(holder)
    assert client.get(f"/loom/link/{token}/").status_code == 404

    # Revoked: a 404 from the next request on, as for a stranger.
    as_owner(f"/loom/{tree.pk}/share/{editor.pk}/revoke/", {})
    assert heard() == {"type": "access.changed", "user_id": editor.pk}
    client.force_login(editor)
    assert client.get(f"/loom/{tree.pk}/n/{child.pk}/").status_code == 404
    assert client.get(f"/loom/{tree.pk}/export/weft/").status_code == 404
    assert client.post(f"/loom/{tree.pk}/n/{child.pk}/bookmark/", **HX).status_code == 404
