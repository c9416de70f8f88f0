"""Someone else's runs, checkpoints, presets and prompts are 404s: to see, open,
export, re-run, save, cancel or delete."""

import json

import pytest

from tests.workbench.helpers import make_generation
from workbench.models import Preset, Run, SavedPrompt


@pytest.mark.django_db
def test_it_keeps_other_users_out_over_http(client, make_user, engine):
    alice, bob = make_user(), make_user()
    saved = Run.objects.save_generation(
        make_generation(alice, texts=["alice's secret sample"]), title="alice run"
    )
    unsaved = make_generation(alice, texts=["alice's unsaved sample"])
    running = make_generation(alice, texts=["half"], state="running")
    preset = Preset.objects.create(owner=alice, name="alice preset", params={"n": 2})
    prompt = SavedPrompt.objects.create(owner=alice, name="alice prompt", prompt="secret")

    client.force_login(bob)
    gets = [
        f"/history/{saved.pk}/",
        f"/history/{saved.pk}/export.json",
        f"/history/{saved.pk}/export.jsonl",
        f"/workbench/?run={saved.pk}",
        f"/workbench/?generation={unsaved.pk}",
        f"/workbench/?prompt={prompt.pk}",
        f"/generations/{unsaved.pk}/result/",
        f"/workbench/presets/{preset.pk}/",
    ]
    for url in gets:
        assert client.get(url).status_code == 404, url
    posts = [
        f"/history/{saved.pk}/rerun/",
        f"/history/{saved.pk}/delete/",
        f"/workbench/generations/{unsaved.pk}/save/",
        f"/generations/{running.pk}/cancel/",
        f"/workbench/presets/{preset.pk}/delete/",
        f"/workbench/prompts/{prompt.pk}/delete/",
    ]
    for url in posts:
        assert client.post(url).status_code == 404, url

    # Lists and whole-history exports hold nothing of Alice's.
    for url in ["/history/", "/history/recover/", "/workbench/", "/history/?q=secret"]:
        body = client.get(url).content.decode()
        assert "alice" not in body, url
    exported = b"".join(client.get("/history/export.jsonl").streaming_content)
    assert exported == b""
    assert json.loads(b"".join(client.get("/history/export.json").streaming_content)) == []

    # Nothing changed for Alice.
    assert Run.objects.filter(pk=saved.pk).exists()
    assert Preset.objects.filter(pk=preset.pk).exists()
    assert SavedPrompt.objects.filter(pk=prompt.pk).exists()
    unsaved.refresh_from_db()
    running.refresh_from_db()
    assert unsaved.claimed_at is None and not running.cancel_requested
    assert Run.objects.filter(owner=bob).count() == 0
