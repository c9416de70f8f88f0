"""Invalid input gets a clear message and nothing reaches /v1/completions."""

import pytest

from engine.models import ScriptedModel
from tests.inspector.conftest import received

pytestmark = pytest.mark.django_db


def _post(client, **fields):
    data = {"source": "text", "model": "scripted", "k": "3", "add_special_tokens": "on", **fields}
    return client.post("/inspect/score/", data, headers={"HX-Request": "true"})


@pytest.fixture
def user_client(client, make_user):
    client.force_login(make_user())
    return client


def test_it_refuses_empty_text_without_special_tokens(scripted, user_client):
    data = {"source": "text", "model": "scripted", "k": "3", "text": ""}
    response = user_client.post("/inspect/score/", data, headers={"HX-Request": "true"})
    assert "Empty text with add_special_tokens off" in response.text
    assert received(scripted) == []


def test_it_refuses_token_ids_outside_the_vocabulary(scripted, user_client):
    response = _post(user_client, source="ids", token_ids="2, 5, 999999")
    text = response.text
    assert "out of the vocabulary of scripted" in text
    assert "999999" in text
    # The vocabulary size was found (by bisection on /detokenize) and named.
    size = ScriptedModel().vocab_size
    assert f"it has {size:,} tokens" in text
    assert received(scripted) == []


def test_it_refuses_a_full_vocabulary_prompt_over_the_limit(scripted, user_client):
    response = _post(user_client, text=" the cat" * 600, full_vocab="on")
    assert "at most 1,024 tokens; this one has 1,201" in response.text
    assert received(scripted) == []


def test_it_refuses_non_integer_token_ids(scripted, user_client):
    response = _post(user_client, source="ids", token_ids="1, two, 3")
    assert "is not a token id" in response.text
    assert received(scripted) == []
