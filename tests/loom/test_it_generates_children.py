import re

import pytest

from loom.models import Author, Node
from tests.loom.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_turns_a_generation_into_model_children(
    loom_stack, backend, client, make_user, make_tree
):
    from completions.models import Generation

    user = make_user()
    tree = make_tree(user, prompt="The weather today is")
    client.force_login(user)
    response = client.post(
        f"/loom/{tree.pk}/n/{tree.root.pk}/generate/",
        {"n": "3", "max_tokens": "6", "temperature": "1", "logprobs": "2", "seed": "1"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200, response.text
    g = Generation.objects.get(owner=user)
    for i in range(3):
        assert f'id="gen-{g.pk}-choice-{i}"' in response.text
    assert f'ws-connect="/ws/generations/{g.pk}/"' in response.text
    assert g.target == {"tree": tree.pk, "parent": tree.root.pk}

    kids = wait_for(lambda: list(tree.root.children()) if tree.root.children().count() == 3 else None,
                    what="three children")  # fmt: skip
    g.refresh_from_db()
    assert g.claimed_at is not None and g.state == "done"
    for kid, choice in zip(kids, sorted(g.choices, key=lambda c: c["index"]), strict=True):
        assert kid.author == Author.MODEL and kid.text == choice["text"] and kid.text
        assert kid.checkpoint == g.served_model and kid.request_id == g.request_id
        assert kid.finish_reason == "length" and kid.seed == 1 and "prompt" not in kid.params
        assert "".join(kid.logprobs["tokens"]) == kid.text
    # The result fragment (what the page loads at the end) lists the new children.
    result = client.get(f"/generations/{g.pk}/result/").text
    assert "Added 3 children" not in result  # the worker made them; nothing is made twice
    assert all(f'data-id="{k.pk}"' in result for k in kids)
    assert tree.root.children().count() == 3


def test_it_leaves_a_generation_for_recover_when_its_node_is_gone(
    loom_stack, backend, client, make_user, make_tree
):
    from completions.models import Generation

    user = make_user()
    tree = make_tree(user, prompt="Root")
    doomed = tree.root.add_child(" doomed")
    client.force_login(user)
    client.post(f"/loom/{tree.pk}/n/{doomed.pk}/generate/", {"n": "2", "max_tokens": "40"})
    doomed.delete_subtree()
    g = Generation.objects.get(owner=user)
    wait_for(lambda: Generation.objects.get(pk=g.pk).is_terminal, what="generation end")
    g.refresh_from_db()
    assert g.claimed_at is None and len(g.choices) == 2
    page = client.get("/loom/recover/").text
    assert f"Generation {g.pk}" in page

    response = client.post(
        "/loom/recover/", {"generation": g.pk, "tree": tree.pk, "node": tree.root.pk}
    )
    assert response.status_code == 302
    texts = sorted(n.text for n in tree.root.children() if n.author == Author.MODEL)
    assert texts == sorted(c["text"] for c in g.choices)
    g.refresh_from_db()
    assert g.claimed_at is not None
    assert f"Generation {g.pk}" not in client.get("/loom/recover/").text


def test_it_refuses_over_budget_and_invalid_params_sending_nothing(
    loom_stack, backend, client, make_user, make_tree
):
    from completions.models import Generation, TokenBudget

    user = make_user()
    TokenBudget.objects.create(user=user, monthly_tokens=20)
    tree = make_tree(user, prompt="Root")
    client.force_login(user)
    url = f"/loom/{tree.pk}/n/{tree.root.pk}/generate/"
    over = client.post(url, {"n": "4", "max_tokens": "100"}, HTTP_HX_REQUEST="true")
    assert over.status_code == 422 and "Nothing was sent" in over.text and "budget" in over.text
    bad = client.post(
        url, {"n": "2", "max_tokens": "2", "temperature": "200"}, HTTP_HX_REQUEST="true"
    )
    assert bad.status_code == 422 and "temperature" in bad.text
    too_many = client.post(url, {"n": "17", "max_tokens": "1"}, HTTP_HX_REQUEST="true")
    assert too_many.status_code == 422
    assert re.search(r'id="gen-err-n"[^>]*>must be less than or equal to 16<', too_many.text)
    words = client.post(url, {"n": "three"}, HTTP_HX_REQUEST="true")
    assert words.status_code == 422 and "not an integer" in words.text
    assert not Generation.objects.filter(owner=user).exclude(state="refused").exists()
    assert Node.objects.filter(tree=tree).count() == 1
