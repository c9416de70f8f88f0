"""Save to History with a title Postgres cannot store (a NUL) or too long for
its column: a message on the result page, nothing saved, never a 500."""

import pytest

from completions.models import Generation
from workbench.models import Run

pytestmark = pytest.mark.django_db


def test_it_refuses_the_title_and_keeps_the_result_unsaved(scripted, client, make_user):
    client.force_login(make_user())
    response = client.post(
        "/inspect/score/",
        {"source": "text", "model": "scripted", "k": "2", "add_special_tokens": "on",
         "text": "the owl sang"},
    )  # fmt: skip
    generation = Generation.objects.get(kind="inspect")
    for title in ["owl\x00", "x" * 201]:
        page = client.post(f"/inspect/{generation.pk}/save/", {"title": title}, follow=True)
        assert page.status_code == 200 and "Not saved: title:" in page.text
    assert not Run.objects.exists()
    generation.refresh_from_db()
    assert generation.claimed_at is None
    assert "Save to History" in client.get(response["Location"]).text
