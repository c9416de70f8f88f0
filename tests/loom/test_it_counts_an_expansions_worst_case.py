"""The worst case of an automatic expansion (loom/expansion.py `worst_case`, pure):
every level's requests, each of breadth samples of max_tokens, on a prompt grown by
max_tokens (+1 at the seam) per level, as if no child were left out; and the budget
check refuses the whole expansion before anything is sent."""

import pytest

from loom.expansion import worst_case


def test_it_counts_requests_nodes_and_tokens_level_by_level():
    # 1 level of 3: one request of n=3 on the node's own prompt.
    assert worst_case(10, 1, 3, 20) == (1, 3, 10 + 3 * 20)
    # 2 × 3: the node (1 request), then its 3 children (3 requests, prompts 21 longer).
    one = 10 + 3 * 20
    two = 3 * ((10 + 21) + 3 * 20)
    assert worst_case(10, 2, 3, 20) == (4, 12, one + two)
    # 3 × 2: 1 + 2 + 4 requests, 2 + 4 + 8 nodes.
    w = worst_case(100, 3, 2, 50)
    assert (w.requests, w.nodes) == (7, 14)
    assert w.tokens == (100 + 2 * 50) + 2 * (151 + 2 * 50) + 4 * (202 + 2 * 50)
    # The memory and note are in the prompt's count: a longer prompt costs each request.
    assert worst_case(110, 2, 3, 20).tokens - worst_case(10, 2, 3, 20).tokens == 100 * 4
    assert worst_case(5, 0, 3, 20) == (0, 0, 0)


@pytest.mark.django_db
def test_it_refuses_an_expansion_over_budget_before_sending(
    client, make_user, make_tree, settings, engine_url
):
    import httpx

    from completions.models import Generation, TokenBudget
    from loom.models import Expansion, UndoEntry

    settings.WEFT_BACKEND_URL = f"{engine_url}/v1"
    settings.WEFT_GENERATION_QUEUE = "nobody-listens"
    user = make_user()
    tree = make_tree(user, prompt="The old map showed")
    tree.memory = "Setting: a desert city." * 20
    tree.save()
    TokenBudget.objects.create(user=user, monthly_tokens=2_000)
    client.force_login(user)
    httpx.delete(f"{engine_url}/_scripted/requests", timeout=5)
    page = client.post(
        f"/loom/{tree.pk}/n/{tree.root.pk}/grow/",
        {"model": "scripted", "max_tokens": "40", "depth": "3", "breadth": "3"},
        HTTP_HX_REQUEST="true",
    )
    assert page.status_code == 422
    text = page.content.decode()
    assert "Not expanded: This expansion could use up to" in text
    assert "(13 requests making up to 39 nodes)" in text and "Nothing was sent" in text
    assert "a depth of 1 fits" in text or "a breadth of" in text
    assert not Generation.objects.filter(owner=user).exists()
    assert not Expansion.objects.exists() and not UndoEntry.objects.filter(tree=tree).exists()
    sent = httpx.get(f"{engine_url}/_scripted/requests", timeout=5).json()["requests"]
    assert [r for r in sent if r["path"] == "/v1/completions"] == []
    # Out of bounds: a clear refusal, not a 500.
    wide = client.post(
        f"/loom/{tree.pk}/n/{tree.root.pk}/grow/",
        {"model": "scripted", "depth": "9", "breadth": "3"},
        HTTP_HX_REQUEST="true",
    )
    assert wide.status_code == 422 and "depth" in wide.content.decode()
