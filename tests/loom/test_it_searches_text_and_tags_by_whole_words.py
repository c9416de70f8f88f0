"""Search finds a node by its text or by a tag, and with "whole words only" a word no
longer matches inside another ("King" is not in "asking"); the trees page and the tree's
own search agree."""

import pytest

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_it_searches_text_and_tags_by_whole_words(client, make_user, make_tree):
    user = make_user()
    tree = make_tree(user, prompt="The King rode out.")
    asking = tree.root.add_child(" She kept asking why.")
    tagged = tree.root.add_child(" A quiet chapter.")
    tagged.add_tag("Kingdom lore")
    client.force_login(user)

    def found(url, **query):
        page = client.get(url, query, **HX).content.decode()
        return {n.pk for n in tree.nodes.all() if f"#{n.pk}<" in page or f"node {n.pk}<" in page}

    url = f"/loom/{tree.pk}/search/"
    assert found(url, q="king") == {tree.root.pk, asking.pk, tagged.pk}
    assert found(url, q="king", whole="on") == {tree.root.pk}
    assert found(url, q="lore") == {tagged.pk}  # a tag alone
    page = client.get(url, {"q": "lore"}, **HX).content.decode()
    assert "tag <mark>Kingdom lore</mark>" in page
    assert found(url, q="kingdom lore", whole="on") == {tagged.pk}
    assert found(url, q="out.", whole="on") == {tree.root.pk}  # punctuation bounds nothing
    assert found(url, q="(") == set()  # taken literally, not as a pattern

    assert found("/loom/", q="asking") == {asking.pk}
    assert found("/loom/", q="King", whole="on") == {tree.root.pk}
    # Another user's tree is never searched.
    other = make_tree(make_user(), prompt="King of elsewhere")
    assert other.root.pk not in found("/loom/", q="King")
