"""Generated children are an undo step of their own. Undoing it takes them out
and hands the generation back to Recover (its checkpoint still holds the text);
undoing the add of their parent afterwards deletes only that node. An add whose
node has children without an undo step is refused rather than cascading."""

import pytest

from completions.models import Generation
from loom import generation as gen
from loom.models import Author, LoomError, Node
from loom.undo import undo_last

pytestmark = pytest.mark.django_db


def finished(user, tree, parent, texts):
    return Generation.objects.create(
        owner=user, kind="loom", params={"prompt": "x", "n": len(texts)}, state="done",
        target={"tree": tree.pk, "parent": parent.pk},
        choices=[{"index": i, "text": t} for i, t in enumerate(texts)],
    )  # fmt: skip


def test_it_undoes_the_generation_before_the_add_and_keeps_its_text(client, make_tree):
    tree = make_tree(prompt="Root")
    user = tree.owner
    added = tree.root.add_child(" a node")
    g = finished(user, tree, added, [" one", " two"])
    made = gen.materialize(g)
    assert [n.text for n in made] == [" one", " two"]
    client.force_login(user)

    page = client.post(f"/loom/{tree.pk}/undo/", follow=True)
    assert "Undid: generate 2 generated nodes" in page.text
    assert Node.objects.filter(pk=added.pk).exists()
    assert not Node.objects.filter(author=Author.MODEL).exists()
    g.refresh_from_db()
    assert g.claimed_at is None
    assert f"Generation {g.pk}" in client.get("/loom/recover/").text
    # Its result page does not quietly attach it again.
    client.get(f"/generations/{g.pk}/result/")
    assert not Node.objects.filter(author=Author.MODEL).exists()

    client.post(f"/loom/{tree.pk}/undo/")
    assert list(Node.objects.filter(tree=tree)) == [tree.root]

    client.post("/loom/recover/", {"generation": g.pk, "tree": tree.pk, "node": tree.root.pk})
    assert [n.text for n in tree.root.children()] == [" one", " two"]


def test_it_refuses_an_undo_that_would_cascade_to_unlogged_children(client, make_tree):
    tree = make_tree(prompt="Root")
    added = tree.root.add_child(" a node")
    added.add_child(" kept", log=False, author=Author.MODEL)
    client.force_login(tree.owner)
    response = client.post(f"/loom/{tree.pk}/undo/", HTTP_HX_REQUEST="true")
    assert response.status_code == 422 and "Not undone (add a node)" in response.text
    assert Node.objects.filter(tree=tree).count() == 3
    # The refused step is dropped, so it does not block the steps before it.
    assert not tree.undo_log.exists() and undo_last(tree) is None


def test_it_keeps_the_nodes_when_the_checkpoint_has_expired(make_tree):
    tree = make_tree(prompt="Root")
    g = finished(tree.owner, tree, tree.root, [" only copy"])
    gen.materialize(g)
    Generation.objects.filter(pk=g.pk).delete()  # as the 7-day purge does
    with pytest.raises(LoomError, match="expired"):
        undo_last(tree)
    assert [n.text for n in tree.root.children()] == [" only copy"]
