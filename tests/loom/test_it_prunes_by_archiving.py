"""Prune: archiving a node (x / the Archive button) hides it from the children
list and the outline until "show archived (N)" is on; undo brings it back."""

import pytest

from loom.models import LoomError, Node
from loom.undo import undo_last

pytestmark = pytest.mark.django_db


def reader(client, tree, node):
    response = client.get(f"/loom/{tree.pk}/n/{node.pk}/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    return response.text


def test_it_archives_hides_shows_and_undoes(client, make_user, make_tree):
    user = make_user()
    tree = make_tree(user, prompt="Root")
    root = tree.root
    gone = root.add_child(" <b>gone</b>")  # first child: → would go here if it were listed
    keep = root.add_child(" keep")
    client.force_login(user)

    response = client.post(f"/loom/{tree.pk}/n/{gone.pk}/archive/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and Node.objects.get(pk=gone.pk).archived
    assert "Unarchive (x)" in response.text and 'class="archived-mark"' in response.text
    # The archived node itself still opens; its sibling's outline skips it.
    page = reader(client, tree, keep)
    assert f'data-id="{gone.pk}"' not in page and "show archived (1)" in page
    page = reader(client, tree, root)
    assert f'data-id="{gone.pk}"' not in page and f'data-id="{keep.pk}"' in page
    assert f'data-child="{keep.pk}"' in page

    # The toggle lists it (marked, and escaped), and sticks across pages.
    toggled = client.post(f"/loom/{tree.pk}/n/{root.pk}/show-archived/", HTTP_HX_REQUEST="true")
    assert toggled.status_code == 200 and f'data-id="{gone.pk}"' in toggled.text
    assert "hide archived (1)" in toggled.text and "child human archived" in toggled.text
    assert "&lt;b&gt;gone&lt;/b&gt;" in toggled.text and "<b>gone" not in toggled.text
    assert f'data-id="{gone.pk}"' in reader(client, tree, keep)
    client.post(f"/loom/{tree.pk}/n/{root.pk}/show-archived/", HTTP_HX_REQUEST="true")
    assert f'data-id="{gone.pk}"' not in reader(client, tree, root)

    # Undo (z) unarchives.
    undone = client.post(f"/loom/{tree.pk}/undo/", HTTP_HX_REQUEST="true")
    assert "Undid: archive a node." in undone.text and not Node.objects.get(pk=gone.pk).archived
    page = reader(client, tree, root)
    assert f'data-id="{gone.pk}"' in page and "show archived" not in page

    # Toggling back and forth logs each step.
    node = Node.objects.get(pk=gone.pk)
    assert node.toggle_archive() is True and node.toggle_archive() is False
    assert undo_last(tree)[0] == "unarchive a node" and Node.objects.get(pk=gone.pk).archived


def test_it_refuses_to_archive_the_root_and_other_users_trees(client, make_user, make_tree):
    owner, intruder = make_user("owner"), make_user("intruder")
    tree = make_tree(owner)
    child = tree.root.add_child(" c")
    with pytest.raises(LoomError):
        tree.root.toggle_archive()
    client.force_login(intruder)
    assert client.post(f"/loom/{tree.pk}/n/{child.pk}/archive/").status_code == 404
    assert client.post(f"/loom/{tree.pk}/n/{child.pk}/show-archived/").status_code == 404
    assert not Node.objects.get(pk=child.pk).archived
