"""Presets: named parameter sets per user, saved from the form, loaded into it."""

import pytest

from workbench.models import Preset


@pytest.mark.django_db
def test_it_saves_loads_and_deletes_presets(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    form = {
        "preset_name": "cold and short",
        "prompt": "not part of a preset",
        "model": "scripted",
        "temperature": "0.2",
        "max_tokens": "12",
        "n": "2",
        "stop_1": "\\n",
        "echo__present": "1",
        "add_special_tokens__present": "1",
        "add_special_tokens": "on",
    }
    response = client.post("/workbench/presets/", form, headers={"HX-Request": "true"})
    assert "cold and short" in response.content.decode()
    preset = Preset.objects.get(owner=user, name="cold and short")
    assert preset.params == {
        "model": "scripted", "max_tokens": 12, "n": 2, "temperature": 0.2, "stop": ["\n"],
        "echo": False, "add_special_tokens": True,  # every setting shown is kept, defaults too
    }  # fmt: skip

    # Saving under the same name replaces it.
    client.post("/workbench/presets/", {**form, "temperature": "0.3"})
    assert Preset.objects.get(owner=user, name="cold and short").params["temperature"] == 0.3

    loaded = client.get(f"/workbench/presets/{preset.pk}/").content.decode()
    assert 'id="params"' in loaded
    assert 'name="temperature" value="0.3"' in loaded
    assert 'name="n" value="2"' in loaded
    assert 'name="stop_1" value="\\n"' in loaded

    client.post(f"/workbench/presets/{preset.pk}/delete/")
    assert not Preset.objects.filter(owner=user).exists()
    page = client.get("/workbench/").content.decode()
    assert "cold and short" not in page and "No presets yet." in page
