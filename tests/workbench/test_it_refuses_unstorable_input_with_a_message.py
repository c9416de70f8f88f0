"""NUL bytes in a prompt, a saved prompt, a preset name or a History search, and
a sample index like "²" (a digit to str.isdigit, not to int): each gets a
message, never a 500, and nothing is stored."""

import pytest

from completions.models import Generation
from loom.models import Tree
from workbench.models import Preset, Run, SavedPrompt

pytestmark = pytest.mark.django_db


def test_it_refuses_nul_in_saved_prompts_presets_and_the_loom_button(client, make_user):
    client.force_login(make_user())
    saved = client.post("/workbench/prompts/", {"prompt_name": "p", "prompt": "a\x00b"})
    assert saved.status_code == 200 and "Not saved" in saved.text and "Null" in saved.text
    named = client.post("/workbench/prompts/", {"prompt_name": "p\x00", "prompt": "ab"})
    assert "Not saved" in named.text
    preset = client.post("/workbench/presets/", {"preset_name": "x\x00", "max_tokens": "5"})
    assert "Not saved" in preset.text
    stop = client.post("/workbench/presets/", {"preset_name": "x", "stop_1": "\x00"})
    assert "Not saved" in stop.text and "stop" in stop.text
    loom = client.post("/workbench/loom/", {"prompt": "a\x00"}, follow=True)
    assert loom.status_code == 200 and "Not opened in the Loom" in loom.text
    assert not SavedPrompt.objects.exists() and not Preset.objects.exists()
    assert not Tree.objects.exists()


def test_it_marks_a_nul_prompt_before_sending(client, make_user):
    client.force_login(make_user())
    response = client.post("/workbench/run/", {"prompt": "a\x00", "max_tokens": "3"})
    assert response.status_code == 200 and "Nothing was sent" in response.text
    assert 'id="err-prompt"' in response.text and "Null characters" in response.text
    assert not Generation.objects.exists()


def test_it_answers_a_nul_search_on_history(client, make_user):
    client.force_login(make_user())
    for url in ["/history/?q=%00", "/history/?model=%00", "/history/?since=2026-13-45"]:
        page = client.get(url)
        assert page.status_code == 200 and "Filter not applied" in page.text, url
    assert client.get("/history/export.json?q=%00").status_code == 200


def test_it_refuses_an_odd_sample_index(client, make_user):
    user = make_user()
    client.force_login(user)
    g = Generation.objects.create(
        owner=user, kind="workbench", params={"prompt": "x"}, state="done",
        choices=[{"index": 0, "text": "a"}, {"index": 1, "text": "b"}],
    )  # fmt: skip
    for choice in ["²", "-1", "7", "1" * 50]:
        response = client.post(f"/workbench/generations/{g.pk}/save/", {"choice": choice})
        assert response.status_code == 200 and "Select a valid choice" in response.text, choice
    assert not Run.objects.exists()
    kept = client.post(f"/workbench/generations/{g.pk}/save/", {"choice": "1"})
    assert kept.status_code == 302
    assert [s.text for s in Run.objects.get().samples.all()] == ["b"]
