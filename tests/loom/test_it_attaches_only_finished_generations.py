"""Recover attaches a generation only once it has finished: a running one's
partial text would be claimed and its final text would never become nodes.
Checked by the view and by the domain method."""

import pytest

from completions.models import Generation
from loom import generation as gen
from loom.models import LoomError, Node

pytestmark = pytest.mark.django_db


def loom_generation(user, tree, state, **fields):
    return Generation.objects.create(
        owner=user, kind="loom", params={"prompt": "x", "n": 1}, state=state,
        target={"tree": tree.pk, "parent": tree.root.pk},
        choices=[{"index": 0, "text": " partial so far"}], **fields,
    )  # fmt: skip


@pytest.mark.parametrize("state", ["running", "queued"])
def test_it_refuses_to_attach_a_generation_still_going(state, client, make_tree):
    tree = make_tree(prompt="Root")
    user = tree.owner
    g = loom_generation(user, tree, state)
    client.force_login(user)
    page = client.post(
        "/loom/recover/", {"generation": g.pk, "tree": tree.pk, "node": tree.root.pk}, follow=True
    )
    assert page.status_code == 200 and f"Generation {g.pk} is still {state}" in page.text
    with pytest.raises(LoomError, match="still"):
        gen.attach_to(user, g.pk, tree.root)
    g.refresh_from_db()
    assert g.claimed_at is None and Node.objects.filter(tree=tree).count() == 1


def test_it_attaches_it_once_finished(client, make_tree):
    tree = make_tree(prompt="Root")
    g = loom_generation(tree.owner, tree, "done")
    client.force_login(tree.owner)
    client.post("/loom/recover/", {"generation": g.pk, "tree": tree.pk, "node": tree.root.pk})
    assert [n.text for n in tree.root.children()] == [" partial so far"]
    g.refresh_from_db()
    assert g.claimed_at is not None
