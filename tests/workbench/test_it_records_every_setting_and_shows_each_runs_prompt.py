"""Every setting the form shows is sent and recorded, defaults included (Compare and the
History export list them all); each run card shows its own prompt and says what Re-run
sends; the help speaks of the chosen model (its logprobs cap, what its tokenizer adds);
History names a run by the number the Workbench showed."""

import json
import re

import pytest

from completions.models import Generation
from workbench.models import Run

pytestmark = pytest.mark.django_db

# The form as a fresh page posts it: every field, at its initial value.
PAGE_FORM = {
    "model": "scripted", "max_tokens": "8", "n": "1", "temperature": "1.0", "top_p": "1.0",
    "top_k": "-1", "min_p": "0.0", "presence_penalty": "0.0", "frequency_penalty": "0.0",
    "repetition_penalty": "1.0", "seed": "", "logprobs": "", "echo__present": "1",
    "add_special_tokens__present": "1", "add_special_tokens": "on",
    "stop_1": "", "stop_2": "", "stop_3": "", "stop_4": "",
}  # fmt: skip
HX = {"HX-Request": "true"}


def test_it_sends_and_shows_every_setting(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    client.post("/workbench/run/", {**PAGE_FORM, "prompt": "The first prompt"}, headers=HX)
    first = Generation.objects.get(owner=user)
    sent = first.params
    for name, value in {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
                        "presence_penalty": 0.0, "frequency_penalty": 0.0,
                        "repetition_penalty": 1.0, "echo": False,
                        "add_special_tokens": True}.items():  # fmt: skip
        assert sent[name] == value, name
    assert isinstance(sent["seed"], int)

    # View code shows the same whole request.
    code = client.post("/workbench/code/", {**PAGE_FORM, "prompt": "P"}, headers=HX).text
    assert "&quot;top_p&quot;: 1.0" in code and "&quot;presence_penalty&quot;: 0.0" in code
    # The Python client line is split, so no line runs past the panel.
    python = re.search(r'<pre id="code-python" class="code">(.*?)</pre>', code, re.S)[1]
    assert max(len(line) for line in python.splitlines() if "prompt=" not in line) < 80

    # A second run with another prompt (a branch replaced the editor's): each card keeps
    # its own prompt, and says Re-run sends it.
    client.post("/workbench/run/", {**PAGE_FORM, "prompt": "Another prompt", "top_p": "0.9"},
                headers=HX)  # fmt: skip
    second = Generation.objects.exclude(pk=first.pk).get(owner=user)
    page = client.get("/workbench/").text
    card = page[page.index(f'id="run-{first.pk}"') :]
    card = card[: card.index("</section>")]
    assert '<details class="run-prompt">' in card
    assert '<pre class="prompt-view">The first prompt</pre>' in card
    assert f"Re-run sends this prompt and these settings, seed {sent['seed']}" in card

    # Compare lists every setting, top_p included, the difference marked.
    Generation.objects.filter(pk__in=[first.pk, second.pk]).update(state="done")
    compare = client.get(f"/workbench/compare/?a={first.pk}&b={second.pk}").text
    assert re.search(r'<tr class="differs">\s*<th scope="row">top_p</th>', compare)
    assert re.search(r'<th scope="row">presence_penalty</th>', compare)

    # History: the run's own number, and the export with every setting.
    run = Run.objects.save_generation(Generation.objects.get(pk=first.pk))
    assert run.number == first.pk
    history = client.get("/history/").text
    assert f"run {first.pk}" in history
    exported = json.loads(b"".join(client.get("/history/export.json").streaming_content))
    assert exported[0]["run"] == first.pk
    assert exported[0]["parameters"]["top_p"] == 1.0
    assert exported[0]["parameters"]["temperature"] == 1.0


def test_it_words_the_help_for_the_chosen_model(client, make_user, engine):
    client.force_login(make_user())
    page = client.get("/workbench/").text
    # The scripted engine serves "scripted" with a logprobs cap of 20 (not the schema's 100).
    assert re.search(r'id="help-logprobs">0 – 20 for scripted;', page)
    # Its tokenizer prepends a BOS token when asked (SmolLM2's adds none: said so there).
    assert "scripted&#x27;s tokenizer prepends its BOS token when on" in page
    check = client.post("/workbench/check/", {**PAGE_FORM, "prompt": "x"}, headers=HX).text
    assert 'id="help-logprobs" hx-swap-oob="true">0 – 20 for scripted' in check


def test_it_says_where_samples_split_in_characters(client, make_user):
    from tests.workbench.helpers import make_generation

    user = make_user()
    client.force_login(user)
    generation = make_generation(user, texts=["The cat sat.", "The cat ran.", "The dog ran."])
    page = client.get(f"/generations/{generation.pk}/result/", headers=HX).text
    assert re.search(r"splits at character \d+<", page) and "splits @" not in page
