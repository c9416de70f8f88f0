"""The parts a change touches (…/n/<node>/live/, what an open page re-reads on another
person's change) are the tree's members' only, escape the text, and hold nothing
particular to who asked (no form token): one rendering serves every page of one role on
the node, and a viewer's holds none of the controls that would change the tree."""

import pytest

from tests.loom.sharing import share

pytestmark = pytest.mark.django_db


def test_it_serves_members_the_same_escaped_parts_and_strangers_a_404(make_user, make_tree, client):
    owner, editor, viewer, stranger = make_user(), make_user(), make_user(), make_user()
    tree = make_tree(owner, prompt="A <script>alert(1)</script> root")
    kid = tree.root.add_child(" <b>kid</b>")
    share(tree, editor, "editor")
    share(tree, viewer, "viewer")
    url = f"/loom/{tree.pk}/n/{tree.root.pk}/live/"
    pages = []
    for user in (owner, editor, viewer):
        client.force_login(user)
        pages.append(client.get(url).content.decode())
    client.force_login(stranger)
    assert client.get(url).status_code == 404
    assert pages[0] == pages[1]
    assert 'id="edit-dialog"' in pages[0] and 'id="edit-dialog"' not in pages[2]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[2]
    page = pages[0]
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;kid&lt;/b&gt;" in page
    assert "csrfmiddlewaretoken" not in page
    for part in ("loom-path", "loom-children", "whole-tree", "loom-near", "node-meta", "loom-nav"):
        assert f'id="{part}"' in page
    assert f'data-id="{kid.pk}"' in page
    # A change makes a new rendering (not the one cached before it).
    kid.edit(" changed")
    client.force_login(owner)
    assert " changed" in client.get(url).content.decode()
