"""Inspect's /tokenize and /detokenize calls are the door's client methods: they carry
its Authorization header; absurd token ids are refused at the form (no backend call,
no 500) and the vocabulary search is bounded whatever the ids."""

import pytest

from completions.client import forget_backend_cache
from engine.models import ScriptedModel
from inspector.tokens import MAX_TOKEN_ID
from tests.inspector.conftest import received

pytestmark = pytest.mark.django_db


@pytest.fixture
def user_client(client, make_user):
    client.force_login(make_user())
    return client


def score(client, **fields):
    data = {"source": "ids", "model": "scripted", "k": "3", "add_special_tokens": "on", **fields}
    return client.post("/inspect/score/", data, headers={"HX-Request": "true"})


@pytest.mark.parametrize("digits", [40, 5000])
def test_it_refuses_absurd_ids_at_the_form(scripted, user_client, digits):
    response = score(user_client, token_ids=f"2, 5, {'9' * digits}")
    assert response.status_code == 200
    assert "larger than any model" in response.text
    assert received(scripted, "/detokenize") == []
    assert received(scripted) == []


def test_it_bounds_the_vocabulary_search(scripted, user_client):
    response = score(user_client, token_ids=f"2, {MAX_TOKEN_ID}")
    size = ScriptedModel().vocab_size
    assert f"it has {size:,} tokens" in response.text
    assert len(received(scripted, "/detokenize")) <= 27  # log2(2**24) + 3
    assert received(scripted) == []


def test_it_sends_the_clients_authorization(scripted, user_client, settings):
    settings.WEFT_BACKEND_API_KEY = "k-door-123"
    forget_backend_cache()
    score(user_client, source="text", text="The cat sat")
    score(user_client, token_ids="2, 999999")
    calls = received(scripted, "/tokenize") + received(scripted, "/detokenize")
    assert {r["path"] for r in calls} == {"/tokenize", "/detokenize"}
    assert all(r["headers"].get("authorization") == "Bearer k-door-123" for r in calls)
    assert all(r["headers"].get("x-acs-workload") == "interactive" for r in calls)
