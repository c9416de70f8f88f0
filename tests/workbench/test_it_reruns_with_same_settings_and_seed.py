"""Re-run from History starts the same request again, seed included."""

import pytest

from completions.models import Generation
from tests.workbench.helpers import make_generation
from workbench.models import Run


@pytest.mark.django_db
def test_it_reruns_with_same_settings_and_seed(client, make_user, engine):
    user = make_user()
    original = make_generation(user, texts=["a", "b"])
    original.params = {
        "model": "scripted", "prompt": "Again", "max_tokens": 8, "n": 2, "seed": 99,
        "temperature": 0.5, "stream": True, "stream_options": {"include_usage": True},
    }  # fmt: skip
    original.save()
    run = Run.objects.save_generation(original)
    assert "stream" not in run.params
    client.force_login(user)

    response = client.post(f"/history/{run.pk}/rerun/")
    again = Generation.objects.exclude(pk=original.pk).get(owner=user)
    assert response["Location"] == f"/workbench/?generation={again.pk}"
    for key in ("model", "prompt", "max_tokens", "n", "seed", "temperature"):
        assert again.params[key] == original.params[key]
    assert again.kind == "workbench" and again.state == "queued"

    page = client.get(response["Location"]).content.decode()
    assert f'ws-connect="/ws/generations/{again.pk}/"' in page
    assert 'name="seed" value="99"' in page and ">Again</textarea>" in page

    # Deleting removes it from History.
    client.post(f"/history/{run.pk}/delete/")
    assert not Run.objects.filter(pk=run.pk).exists()
