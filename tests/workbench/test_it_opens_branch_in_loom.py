"""A prompt (or "text up to here" from the token view) opens in the Loom as a new tree."""

import pytest

from loom.models import Tree


@pytest.mark.django_db
def test_it_opens_branch_in_loom(client, make_user):
    user = make_user()
    client.force_login(user)
    response = client.post("/workbench/loom/", {"prompt": "The fox said <hi>"})
    tree = Tree.objects.get(owner=user)
    assert tree.root.text == "The fox said <hi>"
    assert response.status_code == 302 and response["Location"].startswith("/loom/")
