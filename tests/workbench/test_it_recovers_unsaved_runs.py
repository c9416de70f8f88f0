"""Recover lists finished, unsaved, unexpired checkpoints with their expiry; saving
one (all or chosen samples) moves it to History."""

import datetime as dt

import pytest
from django.utils import timezone

from tests.workbench.helpers import make_generation
from workbench.models import Run


@pytest.mark.django_db
def test_it_recovers_unsaved_runs(client, make_user):
    user = make_user()
    kept = make_generation(user, texts=["first sample", "second sample"], prompt="keep me")
    make_generation(
        user, texts=["x"], prompt="expired one", expires_at=timezone.now() - dt.timedelta(days=1)
    )
    make_generation(user, texts=["x"], prompt="still running", state="running")
    make_generation(user, texts=["x"], prompt="a loom run", kind="loom")
    client.force_login(user)

    page = client.get("/history/recover/").content.decode()
    assert "keep me" in page
    assert kept.expires_at.strftime("%Y-%m-%d %H:%M") in page
    for hidden in ("expired one", "still running", "a loom run"):
        assert hidden not in page

    response = client.post(
        f"/workbench/generations/{kept.pk}/save/",
        {"title": "kept", "note": "why", "choices_present": "1", "choice": ["1"]},
    )
    run = Run.objects.get(owner=user)
    assert response.status_code == 302 and response["Location"] == f"/history/{run.pk}/"
    assert (run.title, run.note) == ("kept", "why")
    assert [s.text for s in run.samples.all()] == ["second sample"]
    assert "keep me" not in client.get("/history/recover/").content.decode()
    kept.refresh_from_db()
    assert kept.claimed_at is not None

    # Unticking every sample saves nothing.
    other = make_generation(user, texts=["a"])
    fragment = client.post(
        f"/workbench/generations/{other.pk}/save/", {"choices_present": "1"},
        headers={"HX-Request": "true"},
    ).content.decode()  # fmt: skip
    assert "Choose a sample" in fragment and Run.objects.count() == 1
