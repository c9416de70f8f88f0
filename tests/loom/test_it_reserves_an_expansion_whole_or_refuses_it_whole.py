"""Two expansions started at once by one user, which together pass the budget: the
first to take the budget's lock reserves its whole worst case (a hold its requests draw
on), the other is refused whole with nothing sent — and cancelling the first gives the
rest of its hold back."""

import threading

import httpx
import pytest
from django.db import connections
from django.test import Client

from completions.budget import usage_summary
from completions.client import count_tokens
from completions.models import BudgetMonth, Generation, TokenBudget
from loom import expansion as growing
from loom.expansion import worst_case
from loom.models import Expansion

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "The old map showed"
FORM = {"model": "scripted", "max_tokens": "20", "depth": "2", "breadth": "2"}


def test_it_reserves_one_expansion_whole_and_refuses_the_other_whole(
    make_user, make_tree, settings, engine_url
):
    settings.WEFT_BACKEND_URL = f"{engine_url}/v1"
    settings.WEFT_GENERATION_QUEUE = "nobody-listens"  # nothing runs: what is held stays
    user = make_user()
    trees = [make_tree(user, prompt=PROMPT), make_tree(user, prompt=PROMPT)]
    worst = worst_case(count_tokens("scripted", [PROMPT])[0], 2, 2, 20).tokens
    TokenBudget.objects.create(user=user, monthly_tokens=worst + worst // 2)  # one fits
    httpx.delete(f"{engine_url}/_scripted/requests", timeout=5)

    clients = []
    for _ in trees:
        client = Client()
        client.force_login(user)
        clients.append(client)
    together = threading.Barrier(len(trees))
    answers: dict[int, tuple[int, str]] = {}

    def grow(client, tree):
        try:
            together.wait(timeout=10)
            page = client.post(
                f"/loom/{tree.pk}/n/{tree.root.pk}/grow/", FORM, HTTP_HX_REQUEST="true"
            )
            answers[tree.pk] = (page.status_code, page.content.decode())
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=grow, args=pair) for pair in zip(clients, trees, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(status for status, _ in answers.values()) == [200, 422], answers
    admitted = next(t for t in trees if answers[t.pk][0] == 200)
    refused = next(t for t in trees if answers[t.pk][0] == 422)
    assert "Not expanded: This expansion could use up to" in answers[refused.pk][1]
    assert "Nothing was sent" in answers[refused.pk][1]
    # Reserved whole: the admitted expansion's whole worst case, not its first request's.
    expansion = Expansion.objects.get()
    assert expansion.tree_id == admitted.pk and expansion.worst_case_tokens == worst
    assert usage_summary(user)["reserved"] == worst
    # Refused whole: no expansion, no generation, nothing sent for the other tree.
    runs = Generation.objects.filter(owner=user)
    assert [g.target["tree"] for g in runs] == [admitted.pk]
    sent = httpx.get(f"{engine_url}/_scripted/requests", timeout=5).json()["requests"]
    assert [r for r in sent if r["path"] == "/v1/completions"] == []

    # Cancelled: its queued request settles to nothing and the rest of the hold goes back.
    growing.cancel(expansion)
    assert usage_summary(user)["reserved"] == 0
    assert not BudgetMonth.objects.filter(account__startswith="hold:").exists()
