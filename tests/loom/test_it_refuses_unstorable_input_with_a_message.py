"""A NUL byte (Postgres text cannot hold it), an over-long title or a node id
that is not a number: each gets a message, never a 500, and nothing changes."""

import re

import pytest

from loom.models import Node, Tree, UndoEntry

pytestmark = pytest.mark.django_db


def counts():
    return Tree.objects.count(), Node.objects.count(), UndoEntry.objects.count()


def test_it_refuses_nul_and_long_titles_on_tree_forms(client, make_tree):
    tree = make_tree(prompt="Root", title="Kept")
    client.force_login(tree.owner)
    before = counts()
    for data, words in [
        ({"prompt": "a\x00b"}, "Null characters are not allowed"),
        ({"prompt": "ab", "title": "t\x00"}, "Null characters are not allowed"),
        ({"prompt": "ab", "title": "x" * 201}, "at most 200 characters"),
        ({"prompt": "   "}, "Write a prompt"),
    ]:
        page = client.post("/loom/", data, follow=True)
        assert page.status_code == 200 and words in page.text, data
    for title in ["x\x00", "y" * 201]:
        page = client.post(f"/loom/{tree.pk}/rename/", {"title": title}, follow=True)
        assert page.status_code == 200 and "Not renamed" in page.text
    assert counts() == before and Tree.objects.get(pk=tree.pk).title == "Kept"


def test_it_refuses_nul_in_node_text_and_tags(client, make_tree):
    tree = make_tree(prompt="Root")
    root = tree.root
    client.force_login(tree.owner)
    before = counts()
    for action, data in [
        ("child", {"text": "a\x00"}),
        ("edit", {"text": "a\x00"}),
        ("tag", {"tag": "t\x00"}),
        ("untag", {"tag": "t\x00"}),
    ]:
        response = client.post(
            f"/loom/{tree.pk}/n/{root.pk}/{action}/", data, HTTP_HX_REQUEST="true"
        )
        assert response.status_code == 422, action
        assert "Null characters are not allowed" in response.text, action
    assert counts() == before and Node.objects.get(pk=root.pk).text == "Root"


def test_it_answers_odd_searches_and_export_ids_clearly(client, make_tree):
    tree = make_tree(prompt="Root")
    client.force_login(tree.owner)
    page = client.get("/loom/?q=%00")
    assert page.status_code == 200 and "Search refused" in page.text
    hits = client.get(f"/loom/{tree.pk}/search/?q=%00", HTTP_HX_REQUEST="true")
    assert hits.status_code == 200 and "Null characters are not allowed" in hits.text
    export = client.get(f"/loom/{tree.pk}/export/txt/?node=abc")
    assert export.status_code == 400 and "Enter a whole number" in export.text
    assert client.get(f"/loom/{tree.pk}/export/txt/?node=99999999999999999999").status_code == 400


def test_it_refuses_unstorable_generation_settings_before_saving_them(client, make_tree):
    tree = make_tree(prompt="Root")
    client.force_login(tree.owner)
    url = f"/loom/{tree.pk}/n/{tree.root.pk}/generate/"
    for data, field, words in [
        ({"model": "m\x00", "save_defaults": "on"}, "model", "Null characters are not allowed"),
        ({"stop_1": "\x00", "save_defaults": "on"}, "stop", "Null characters are not allowed"),
        ({"temperature": "nan", "save_defaults": "on"}, "temperature", "&#x27;nan&#x27; is not a number"),
        ({"top_p": "1e309", "save_defaults": "on"}, "top_p", "&#x27;1e309&#x27; is not a number"),
    ]:  # fmt: skip
        response = client.post(url, data, HTTP_HX_REQUEST="true")
        assert response.status_code == 422, data
        # Next to its field (the form's error slot, swapped in out of band).
        assert re.search(rf'id="gen-err-{field}"[^>]*>[^<]*{words}', response.text), data
    tree.refresh_from_db()
    assert tree.settings == {}
