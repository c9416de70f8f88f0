"""On a shared tree undo and redo act on my own steps; undoing one of mine that
someone else has built on since (a node below mine, or an edit of it) is refused with
a message naming them, and nothing changes."""

import pytest

from loom.models import Node
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db


def post(client, url, data=None):
    return client.post(url, data or {}, headers={"HX-Request": "true"})


def test_it_undoes_mine_and_refuses_over_someone_elses_later_work(make_user, make_tree, client):
    from django.test import Client

    owner, editor = make_user("ann"), make_user("ben")
    tree = make_tree(owner, prompt="Root. ")
    share(tree, editor, "editor")
    a, b = client, Client()
    a.force_login(owner)
    b.force_login(editor)
    base = f"/loom/{tree.pk}"
    root = tree.root

    assert post(a, f"{base}/n/{root.pk}/child/", {"text": "Ann's line."}).status_code == 200
    mine = Node.objects.get(parent=root, text="Ann's line.")
    assert post(b, f"{base}/n/{mine.pk}/child/", {"text": "Ben's line below."}).status_code == 200
    assert post(b, f"{base}/n/{root.pk}/bookmark/").status_code == 200

    # Ann's undo would delete Ben's node below hers: refused, nothing changes.
    refused = post(a, f"{base}/undo/")
    text = refused.content.decode()
    assert refused.status_code == 422
    assert "Not undone (add a node): ben has since changed node" in text
    assert Node.objects.filter(tree=tree).count() == 3

    # Ben's undo takes his own last step (the bookmark), not Ann's.
    assert post(b, f"{base}/undo/").status_code == 200
    root.refresh_from_db()
    assert not root.bookmarked and Node.objects.filter(tree=tree).count() == 3
    assert post(b, f"{base}/undo/").status_code == 200  # his node goes
    assert not Node.objects.filter(text="Ben's line below.").exists()
    # Now Ann's undo has nothing of Ben's above it.
    assert post(a, f"{base}/undo/").status_code == 200
    assert Node.objects.filter(tree=tree).count() == 1
    # And redo brings back her step only.
    assert post(a, f"{base}/redo/").status_code == 200
    assert list(Node.objects.filter(parent=root).values_list("text", flat=True)) == ["Ann's line."]
