"""View code: the exact request as curl and as openai-SDK Python, vLLM-only
parameters in extra_body."""

import ast
import json
import re
import shlex

import pytest


@pytest.mark.django_db
def test_it_shows_request_as_curl_and_python(client, make_user, engine):
    client.force_login(make_user())
    form = {
        "model": "scripted", "prompt": "It's a \"test\"\nline two", "max_tokens": "20",
        "n": "2", "temperature": "0.7", "top_k": "20", "min_p": "0.05",
        "repetition_penalty": "1.1", "seed": "42", "logprobs": "5", "stop_1": "\\n\\n",
        "add_special_tokens__present": "1", "echo__present": "1", "echo": "on",
    }  # fmt: skip
    html = client.post("/workbench/code/", form, headers={"HX-Request": "true"}).content.decode()
    from html import unescape

    curl = unescape(re.search(r'<pre id="code-curl" class="code">(.*?)</pre>', html, re.S)[1])
    python = unescape(re.search(r'<pre id="code-python" class="code">(.*?)</pre>', html, re.S)[1])
    expected = {
        "model": "scripted", "prompt": "It's a \"test\"\nline two", "max_tokens": 20, "n": 2,
        "stop": ["\n\n"], "temperature": 0.7, "top_k": 20, "min_p": 0.05,
        "repetition_penalty": 1.1, "seed": 42, "logprobs": 5, "echo": True,
        "add_special_tokens": False,
    }  # fmt: skip
    # add_special_tokens was unticked (its marker is present without the box).
    words = shlex.split(curl.replace("\\\n", " "))
    assert words[:2] == ["curl", "-s"] and words[2].endswith("/v1/completions")
    assert json.loads(words[words.index("-d") + 1]) == expected

    tree = ast.parse(python)
    call = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "create"
    )
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    extra = kwargs.pop("extra_body")
    assert extra == {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1,
                     "add_special_tokens": False}  # fmt: skip
    assert {**kwargs, **extra} == expected

    # An invalid setting shows next to its field instead of code.
    bad = client.post("/workbench/code/", {**form, "top_p": "0"}).content.decode()
    assert "Fix the marked fields" in bad
    assert re.search(r'id="err-top_p"[^>]*>[^<]*greater than 0', bad)
