"""Saved prompts keep their settings; opening one fills the editor and the form."""

import pytest

from workbench.models import SavedPrompt


@pytest.mark.django_db
def test_it_opens_saved_prompt_in_editor(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    client.post(
        "/workbench/prompts/",
        {"prompt_name": "fox tale", "prompt": "The fox & the <owl>", "max_tokens": "30",
         "seed": "1234", "logprobs": "3"},
    )  # fmt: skip
    saved = SavedPrompt.objects.get(owner=user, name="fox tale")
    assert saved.prompt == "The fox & the <owl>"
    assert saved.params == {"max_tokens": 30, "seed": 1234, "logprobs": 3}

    page = client.get(f"/workbench/?prompt={saved.pk}").content.decode()
    assert ">The fox &amp; the &lt;owl&gt;</textarea>" in page
    assert 'name="seed" value="1234"' in page
    assert 'name="logprobs" value="3"' in page
    assert f'href="/workbench/?prompt={saved.pk}">fox tale</a>' in page

    client.post(f"/workbench/prompts/{saved.pk}/delete/")
    assert not SavedPrompt.objects.filter(owner=user).exists()
