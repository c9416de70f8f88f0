"""Two people edit the same node: the first save applies, the second (based on the
version before it) is not applied over it — the writer is shown both texts, escaped,
and can keep theirs as a sibling or apply it over the current one. Nothing is lost."""

import json
import re

import pytest
from django.utils.html import escape

from loom.models import Node
from tests.loom.sharing import share

pytestmark = pytest.mark.django_db


def post(client, tree, node, action, data, htmx=True):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(f"/loom/{tree.pk}/n/{node.pk}/{action}/", data, headers=headers)


def test_it_keeps_the_second_writers_text_and_offers_it_back(make_user, make_tree, client):
    owner, editor = make_user(), make_user()
    tree = make_tree(owner, prompt="Root. ")
    node = tree.root.add_child("The original.")
    share(tree, editor, "editor")
    client.force_login(owner)
    assert (
        post(
            client, tree, node, "edit", {"text": "Owner's <i>take</i>.", "version": "1"}
        ).status_code
        == 200
    )
    client.force_login(editor)
    stale = post(client, tree, node, "edit", {"text": "Editor's <b>take</b>.", "version": "1"})

    assert stale.status_code == 422 and stale["HX-Reswap"] == "none"
    page = stale.content.decode()
    assert "was changed meanwhile" in page
    assert escape("Editor's <b>take</b>.") in page and escape("Owner's <i>take</i>.") in page
    assert "<b>take</b>" not in page  # both texts escaped
    node.refresh_from_db()
    assert (node.text, node.version) == ("Owner's <i>take</i>.", 2)

    # The offered form carries the writer's text and the current version.
    form_text = re.search(r'<textarea name="text" hidden[^>]*>([^<]*)</textarea>', page)[1]
    assert form_text == escape("Editor's <b>take</b>.")
    assert 'name="version" value="2"' in page
    kept = post(
        client,
        tree,
        node,
        "edit",
        {"text": "Editor's <b>take</b>.", "version": "2", "as_sibling": "1"},
    )
    assert kept.status_code == 200
    texts = sorted(Node.objects.filter(parent=tree.root).values_list("text", flat=True))
    assert texts == ["Editor's <b>take</b>.", "Owner's <i>take</i>."]

    # Or over the current one, once it is the version they saw.
    again = post(client, tree, node, "edit", {"text": "Editor's <b>take</b>.", "version": "2"})
    assert again.status_code == 200
    node.refresh_from_db()
    assert (node.text, node.version) == ("Editor's <b>take</b>.", 3)


def test_it_refuses_a_stale_split_merge_and_document_write(make_user, make_tree, client):
    owner = make_user()
    tree = make_tree(owner, prompt="Root. ")
    node = tree.root.add_child("one two three")
    kid = node.add_child(" four")
    node.edit("one two three!", based_on=1)  # someone else's change: version 2
    client.force_login(owner)

    split = post(client, tree, node, "split", {"offset": "3", "version": "1"})
    kid.edit(" four!")  # kid at version 2 now
    merge = post(client, tree, kid, "merge", {"version": "1"})
    edits = json.dumps([{"node": node.pk, "text": "mine instead", "version": 1}])
    write = client.post(
        f"/loom/{tree.pk}/n/{kid.pk}/write/", {"edits": edits}, headers={"HX-Request": "true"}
    )
    for response in (split, merge, write):
        assert response.status_code == 422 and "was changed meanwhile" in response.content.decode()
    assert escape("mine instead") in write.content.decode()
    node.refresh_from_db()
    kid.refresh_from_db()
    assert (node.text, kid.text, kid.parent_id) == ("one two three!", " four!", node.pk)
    assert Node.objects.filter(tree=tree).count() == 3
