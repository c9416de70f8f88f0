"""Save to History keeps the whole Inspect result — token table, choice ranking,
both sides of a compare — so the saved entry still shows it after the 7-day
purge has deleted the checkpoint it was computed from."""

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from completions.models import Generation
from completions.tasks import expire_runs
from tests.inspector.conftest import chips
from workbench.models import Run

pytestmark = pytest.mark.django_db

FORMS = {
    "score": {"source": "text", "model": "scripted", "k": "3", "add_special_tokens": "on",
              "text": "the owl sang at night"},
    "choices": {"model": "scripted", "prefix": "The owl", "add_special_tokens": "on",
                "candidates": " sang\n zq xv"},
    "compare": {"model": "scripted", "model_b": "scripted", "text": " the cat sat",
                "prefix_a": "Once upon a time,", "prefix_b": "The dog ran.",
                "add_special_tokens": "on"},
}  # fmt: skip


def purge_all():
    Generation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    expire_runs()
    assert not Generation.objects.exists()


@pytest.mark.parametrize("mode", list(FORMS))
def test_it_shows_the_saved_result_after_the_checkpoint_is_gone(mode, scripted, client, make_user):
    client.force_login(make_user())
    response = client.post(f"/inspect/{mode}/", FORMS[mode])
    assert response.status_code == 302, response.text
    live = client.get(response["Location"]).text
    generation = Generation.objects.get(kind="inspect")
    target = generation.target
    saved = client.post(f"/inspect/{generation.pk}/save/", {"title": mode})
    run = Run.objects.get(title=mode)
    assert saved.status_code == 302 and run.result == target

    purge_all()
    page = client.get(f"/history/{run.pk}/").text
    if mode == "score":
        assert chips(page) == chips(live) and len(chips(page)) == len(target["rows"])
        assert "Token table" in page
    elif mode == "choices":
        for score in target["scores"]:
            assert f'<tr data-index="{score["index"]}">' in page
        assert page.index("zq") > 0 and "length-normalised" in page
    else:
        delta_chips = re.findall(r'<span class="tok [^"]*\bd[0-4x]\b', page)
        assert len(delta_chips) == len(target["pairs"]) > 0
        assert "minus A" in page
    export = client.get(f"/history/{run.pk}/export.json")
    assert json.loads(b"".join(export.streaming_content))[0]["result"] == target


def test_it_saves_the_second_side_of_a_compare_across_models(make_user):
    user = make_user()
    a = Generation.objects.create(
        owner=user, kind="inspect", params={"prompt": "A"}, state="done",
        choices=[{"index": 0, "text": "", "prompt_logprobs": [None, {"5": {"logprob": -1.0}}]}],
        target={"mode": "compare", "pairs": []},
    )  # fmt: skip
    b = Generation.objects.create(
        owner=user, kind="inspect", params={"prompt": "B"}, state="done",
        choices=[{"index": 0, "text": "", "prompt_logprobs": [None, {"5": {"logprob": -2.0}}]}],
        target={"mode": "compare-part", "of": a.pk},
    )  # fmt: skip
    run = Run.objects.save_generation(a, result=a.target, also=[b])
    samples = list(run.samples.all())
    assert [s.index for s in samples] == [0, 1]
    assert samples[1].prompt_logprobs == b.choices[0]["prompt_logprobs"]
    b.refresh_from_db()
    assert b.claimed_at is not None
