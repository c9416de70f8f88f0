"""Several models at once start one generation per model with that model's request,
or none at all: when the budget covers the first model but not the second, nothing is
reserved, queued or sent. Against the scripted engine routed under two short ids."""

import json

import pytest

from completions.budget import usage_summary
from completions.models import Generation, TokenBudget
from loom.models import Node

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def two_ids(settings, monkeypatch, engine_url):
    from completions.client import forget_backend_cache
    from config.env import env_backends

    entry = {
        "name": "scripted",
        "url": f"{engine_url}/v1",
        "models": {"north": "scripted", "south": "scripted"},
    }
    monkeypatch.setenv("WEFT_BACKENDS", json.dumps([entry]))
    settings.WEFT_BACKENDS = env_backends("WEFT_BACKENDS")
    settings.WEFT_DEFAULT_MODEL = ""
    settings.WEFT_GENERATION_QUEUE = "weft-loomwrite-nobody-listens"  # queued, never run
    forget_backend_cache()
    yield
    forget_backend_cache()


def generate(client, tree, **data):
    return client.post(f"/loom/{tree.pk}/n/{tree.root.pk}/generate/", data, **HX)


def test_it_starts_one_generation_per_model(two_ids, client, make_tree):
    tree = make_tree(prompt="Root")
    client.force_login(tree.owner)
    page = generate(client, tree, models=["north", "south"], n="2", max_tokens="4")
    assert page.status_code == 200 and page.text.count('class="gen-live"') == 2
    started = Generation.objects.filter(target__parent=tree.root.pk).order_by("pk")
    assert [(g.params["model"], g.params["n"], g.state) for g in started] == [
        ("north", 2, "queued"),
        ("south", 2, "queued"),
    ]
    assert all(g.params["prompt"] == "Root" for g in started)
    # A reload shows both still streaming (the page re-attaches to them).
    again = client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/")
    assert again.text.count('ws-connect="/ws/generations/') == 2
    busy = generate(client, tree, models=["north", "south"], n="1", max_tokens="4")
    assert busy.status_code == 422 and "already generating" in busy.text


def test_it_starts_none_when_one_does_not_fit(two_ids, client, make_tree):
    tree = make_tree(prompt="Root")
    TokenBudget.objects.create(user=tree.owner, monthly_tokens=30)
    client.force_login(tree.owner)
    page = generate(client, tree, models=["north", "south"], n="2", max_tokens="10")
    assert page.status_code == 422 and "Nothing was sent" in page.text and "budget" in page.text
    assert not Generation.objects.filter(owner=tree.owner).exclude(state="refused").exists()
    assert usage_summary(tree.owner)["reserved"] == 0
    assert Node.objects.filter(tree=tree).count() == 1
    # One of them alone fits: the refusal was for the pair.
    alone = generate(client, tree, models=["north"], n="2", max_tokens="10")
    assert alone.status_code == 200
    assert [g.params["model"] for g in Generation.objects.filter(owner=tree.owner)] == ["north"]


@pytest.mark.parametrize(
    "models, message",
    [(["north", "nowhere"], "nowhere"), ([f"m{i}" for i in range(9)], "at most 8 models")],
)
def test_it_refuses_unknown_or_too_many_models(two_ids, client, make_tree, models, message):
    tree = make_tree(prompt="Root")
    client.force_login(tree.owner)
    page = generate(client, tree, models=models, n="1", max_tokens="2")
    assert page.status_code == 422 and message in page.text
    assert not Generation.objects.filter(owner=tree.owner).exclude(state="refused").exists()
