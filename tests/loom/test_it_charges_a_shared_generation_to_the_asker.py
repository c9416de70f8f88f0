"""A generation in a shared tree is paid from the budget of the user who asked for it,
not the tree owner's, and refused (not clamped) when it does not fit there."""

import pytest

from completions.budget import usage_summary
from completions.models import Generation, TokenBudget
from loom import access

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def queued_only(backend, settings):
    settings.WEFT_GENERATION_QUEUE = "weft-loomshare-nobody-listens"  # queued, never run


def test_it_charges_the_asker_and_refuses_what_does_not_fit(
    queued_only, client, make_user, make_tree
):
    ann, bob = make_user("ann"), make_user("bob")
    tree = make_tree(ann, prompt="Root")
    access.share(tree, bob, "editor")
    TokenBudget.objects.create(user=ann, monthly_tokens=0)  # the owner has nothing left
    budget = TokenBudget.objects.create(user=bob, monthly_tokens=30)
    url = f"/loom/{tree.pk}/n/{tree.root.pk}/generate/"
    client.force_login(bob)

    # Over bob's own budget: refused whole, nothing queued with a smaller max_tokens.
    over = client.post(url, {"model": "scripted", "n": "2", "max_tokens": "100"}, **HX)
    assert over.status_code == 422 and "Nothing was sent" in over.text and "budget" in over.text
    assert not Generation.objects.exclude(state="refused").exists()

    # Within bob's budget: it runs although the owner's budget is empty, and it is his.
    fits = client.post(url, {"model": "scripted", "n": "1", "max_tokens": "8"}, **HX)
    assert fits.status_code == 200, fits.text
    g = Generation.objects.exclude(state="refused").get()
    assert g.owner_id == bob.pk and g.params["max_tokens"] == 8
    assert usage_summary(bob)["reserved"] > 0 and usage_summary(ann)["reserved"] == 0

    # The owner, out of budget, is refused in her own tree: the budgets are not pooled.
    budget.delete()
    client.force_login(ann)
    other = tree.root.add_child(" elsewhere")
    refused = client.post(
        f"/loom/{tree.pk}/n/{other.pk}/generate/", {"model": "scripted", "max_tokens": "8"}, **HX
    )
    assert refused.status_code == 422 and "budget" in refused.text
    assert not Generation.objects.filter(owner=ann).exclude(state="refused").exists()
