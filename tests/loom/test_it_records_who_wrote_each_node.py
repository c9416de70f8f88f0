"""Each node records who wrote it (typed it, or asked for its generation): shown beside
the model badge, escaped, and exported in Weft JSON as `written_by`. A generation of
someone whose share was revoked meanwhile is not added to the tree (Recover has it)."""

import json

import pytest

from completions.models import Generation
from loom import access
from loom import generation as gen
from loom.models import Node

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def finished(owner, tree, parent, text):
    return Generation.objects.create(
        owner=owner, kind="loom", params={"prompt": "p", "max_tokens": 4, "model": "m1"},
        target={"tree": tree.pk, "parent": parent.pk}, state="done",
        choices=[{"index": 0, "text": text, "finish_reason": "length"}],
    )  # fmt: skip


def test_it_records_who_wrote_each_node(client, make_user, make_tree):
    ann, bob = make_user("ann"), make_user("<b>bob</b>")
    tree = make_tree(ann, prompt="Root")
    assert tree.root.written_by_id == ann.pk
    access.share(tree, bob, "editor")
    client.force_login(bob)
    typed = client.post(f"/loom/{tree.pk}/n/{tree.root.pk}/child/", {"text": " typed"}, **HX)
    assert typed.status_code == 200
    mine = Node.objects.get(tree=tree, text=" typed")
    assert mine.written_by_id == bob.pk
    sibling = client.post(
        f"/loom/{tree.pk}/n/{mine.pk}/edit/", {"text": " retyped", "as_sibling": "1"}, **HX
    )
    assert sibling.status_code == 200
    assert Node.objects.get(tree=tree, text=" retyped").written_by_id == bob.pk
    # Edited in place by ann, the node is still bob's: who made it, not who touched it last.
    client.force_login(ann)
    client.post(f"/loom/{tree.pk}/n/{mine.pk}/edit/", {"text": " typed!"}, **HX)
    assert Node.objects.get(pk=mine.pk).written_by_id == bob.pk

    # bob's generation: its child is bob's, whoever's page attaches it.
    made = gen.materialize(finished(bob, tree, tree.root, " generated"))
    assert made and made[0].written_by_id == bob.pk and made[0].is_model
    page = client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/").text
    assert '<span class="child-writer" title="asked for by">&lt;b&gt;bob&lt;/b&gt;</span>' in page
    assert "<b>bob</b>" not in page
    node_page = client.get(f"/loom/{tree.pk}/n/{made[0].pk}/").text
    assert 'title="asked for by">&lt;b&gt;bob&lt;/b&gt;</span>' in node_page

    exported = b"".join(client.get(f"/loom/{tree.pk}/export/weft/").streaming_content)
    writers = {n["text"]: n["written_by"] for n in json.loads(exported)["nodes"]}
    assert writers == {
        "Root": "ann",
        " typed!": "<b>bob</b>",
        " retyped": "<b>bob</b>",
        " generated": "<b>bob</b>",
    }

    # Imported back by ann: her own nodes stay hers, nobody else's name is taken from a file.
    from loom.formats.importers import import_file

    [copy] = import_file(ann, exported)
    kept = dict(Node.objects.filter(tree=copy).values_list("text", "written_by_id"))
    assert kept == {"Root": ann.pk, " typed!": None, " retyped": None, " generated": None}

    # Revoked before his next generation ends: it is left for his Recover, not attached.
    access.share(tree, bob, None)
    late = finished(bob, tree, tree.root, " too late")
    assert gen.materialize(late) is None
    assert not Node.objects.filter(tree=tree, text=" too late").exists()
    late.refresh_from_db()
    assert late.claimed_at is None
