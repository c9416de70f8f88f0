"""Save to History hands the checkpoint to the workbench's Run.objects.save_generation;
the BOS added by add_special_tokens is shown as a chip."""

import re

import pytest

from completions.models import Generation
from workbench.models import Run

pytestmark = pytest.mark.django_db


def test_it_saves_a_result_to_history(scripted, client, make_user):
    user = make_user()
    client.force_login(user)
    response = client.post(
        "/inspect/score/",
        {"source": "text", "model": "scripted", "k": "2", "add_special_tokens": "on",
         "text": "the owl sang"},
    )  # fmt: skip
    page = client.get(response["Location"]).text
    # The scripted tokenizer prepends <s>: the first chip is that BOS, shown as such.
    assert re.search(r'<span class="tok [^"]*\bspecial\b[^"]*"[^>]*>BOS</span>', page)
    assert "Save to History" in page

    generation = Generation.objects.get(kind="inspect")
    client.post(f"/inspect/{generation.pk}/save/", {"title": "owl"})
    run = Run.objects.get(owner=user)
    assert (run.kind, run.title) == ("inspect", "owl")
    generation.refresh_from_db()
    assert generation.claimed_at is not None
    assert "Save to History" not in client.get(response["Location"]).text
