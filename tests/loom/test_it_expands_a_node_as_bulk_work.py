"""An automatic expansion runs for real (worker, scripted engine): depth × breadth
children level by level, only the best `keep` of each node's children taken further by
mean logprob, every request bulk work with the memory and note in its prompt, each
level's prompt the path so far; the whole expansion is one undo step (and one redo)."""

import httpx
import pytest

from completions.models import Generation
from loom.models import Expansion, Node, Tree
from loom.reading import MEAN_LOGPROB_SQL
from loom.undo import redo_last, undo_last
from tests.loom.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_expands_level_by_level_and_undoes_in_one_step(
    loom_stack, backend, client, make_user, make_tree
):
    from django.db.models.expressions import RawSQL

    user = make_user()
    tree = make_tree(user, prompt="The tide went out and")
    tree.memory = "Genre: sea story"
    tree.save()
    client.force_login(user)
    httpx.delete(f"{backend}/_scripted/requests", timeout=5)
    page = client.post(
        f"/loom/{tree.pk}/n/{tree.root.pk}/grow/",
        {
            "model": "scripted",
            "max_tokens": "5",
            "logprobs": "1",
            "depth": "3",
            "breadth": "2",
            "keep": "1",
        },  # fmt: skip
        HTTP_HX_REQUEST="true",
    )
    assert page.status_code == 200, page.content.decode()[-2000:]
    assert "Expanding node" in page.content.decode()
    expansion = Expansion.objects.get(tree=tree)
    done = wait_for(
        lambda: (x := Expansion.objects.get(pk=expansion.pk)).state != "running" and x,
        timeout=60, what="the expansion to end",
    )  # fmt: skip
    assert done.state == "done", done.message
    # Level by level: 2 children of the root, 2 of the best of them, 2 of the best of those.
    root = tree.root
    level1 = list(root.children())
    assert len(level1) == 2
    scored = dict(
        Node.objects.filter(pk__in=[n.pk for n in level1])
        .annotate(mean=RawSQL(MEAN_LOGPROB_SQL, []))
        .values_list("pk", "mean")
    )
    best = max(level1, key=lambda n: scored[n.pk])
    assert best.children().count() == 2 and sum(n.children().count() for n in level1) == 2
    level2 = list(best.children())
    assert sum(n.children().count() for n in level2) == 2
    assert done.started == done.finished == 3 and done.nodes == 6
    assert tree.nodes.count() == 7
    # Every request bulk work, its prompt the memory and the path so far.
    gens = list(Generation.objects.filter(owner=user).order_by("id"))
    assert len(gens) == 3 and {g.workload for g in gens} == {"batch"}
    assert gens[0].params["prompt"] == "Genre: sea story\nThe tide went out and"
    assert gens[1].params["prompt"] == "Genre: sea story\n" + best.full_text()
    assert all(
        n.prompt_context["memory"] == "Genre: sea story" for n in tree.nodes.exclude(pk=root.pk)
    )

    # One undo step takes it all back; redo brings the same nodes back.
    ids = set(tree.nodes.values_list("pk", flat=True))
    label, _focus = undo_last(Tree.objects.get(pk=tree.pk))
    assert label.startswith("expand from node")
    assert tree.nodes.count() == 1
    redo_last(Tree.objects.get(pk=tree.pk))
    assert set(tree.nodes.values_list("pk", flat=True)) == ids
