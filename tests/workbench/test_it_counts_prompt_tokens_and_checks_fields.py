"""As the user types: the prompt's token count (from the backend's /tokenize) and
each invalid value next to its field."""

import re

import pytest


def slot(html: str, name: str) -> str:
    return re.search(rf'<span id="err-{name}"[^>]*>(.*?)</span>', html, re.S)[1]


@pytest.mark.django_db
def test_it_counts_prompt_tokens_and_checks_fields(client, make_user, engine):
    client.force_login(make_user())
    base = {"model": "scripted", "max_tokens": "16"}
    html = client.post("/workbench/check/", {**base, "prompt": "the cat sat"}).content.decode()
    # The scripted tokenizer: BOS + three words.
    assert re.search(r'id="prompt-tokens"[^>]*>4 prompt tokens<', html)
    assert slot(html, "temperature") == "" and slot(html, "general") == ""

    bad = {
        **base, "prompt": "x", "temperature": "200", "n": "17", "seed": "-1",
        "top_k": "0", "logprobs": "21", "stop_1": "a",
    }  # fmt: skip
    html = client.post("/workbench/check/", bad).content.decode()
    assert "less than or equal to 100" in slot(html, "temperature")
    assert "less than or equal to 16" in slot(html, "n")
    assert "greater than or equal to 0" in slot(html, "seed")
    assert "-1 (disabled) or at least 1" in slot(html, "top_k")
    assert "at most 20" in slot(html, "logprobs")  # the model's own cap
    assert slot(html, "stop") == ""

    html = client.post("/workbench/check/", {**base, "prompt": "x", "n": "4",
                                             "max_tokens": "9000"}).content.decode()  # fmt: skip
    assert "32,000" in slot(html, "max_tokens")
    html = client.post("/workbench/check/", {**base, "prompt": "x", "temperature": "warm"})
    assert "number" in slot(html.content.decode(), "temperature")
    page = client.get("/workbench/").content.decode()
    # A text input: the browser sends what was typed, so "abc" reaches the server.
    assert 'name="temperature" value="1.0" type="text" inputmode="decimal"' in page
    assert "0 – 100; default 1" in page  # the help shows the schema's bounds
    assert '<option value="scripted" selected>scripted (default)</option>' in page
