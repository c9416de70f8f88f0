import pytest

from loom.models import Node, Tree
from tests.loom.conftest import tree_shape

pytestmark = pytest.mark.django_db


def test_it_creates_renames_duplicates_searches_and_deletes_trees(client, make_user):
    user = make_user()
    client.force_login(user)
    response = client.post("/loom/", {"prompt": "A <b>bold</b> beginning", "title": ""})
    tree = Tree.objects.get(owner=user)
    assert response["Location"] == f"/loom/{tree.pk}/n/{tree.root.pk}/"
    assert tree.title == "A <b>bold</b> beginning" and tree.root.text == "A <b>bold</b> beginning"
    tree.root.add_child(" and a middle").add_child(" and an end")

    client.post(f"/loom/{tree.pk}/rename/", {"title": "Renamed"})
    assert Tree.objects.get(pk=tree.pk).title == "Renamed"

    client.post(f"/loom/{tree.pk}/duplicate/")
    copy = Tree.objects.exclude(pk=tree.pk).get(owner=user)
    assert copy.title == "Renamed (copy)" and tree_shape(copy) == tree_shape(tree)
    assert not set(copy.nodes.values_list("id", flat=True)) & set(
        tree.nodes.values_list("id", flat=True)
    )

    listing = client.get("/loom/").text
    assert "Renamed (copy)" in listing
    found = client.get("/loom/", {"q": "an end"}, HTTP_HX_REQUEST="true").text
    assert found.count("<mark>an end</mark>") == 2  # both trees

    client.post(f"/loom/{tree.pk}/delete/")
    assert not Tree.objects.filter(pk=tree.pk).exists()
    assert not Node.objects.filter(tree_id=tree.pk).exists()
    assert Node.objects.filter(tree=copy).count() == 3
