"""On the real model: choice scoring ranks " Paris." first after "The capital of
France is", from one batched request."""

import httpx
import pytest

from completions.models import Generation

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

CANDIDATES = [" a banana.", " Paris.", " purple seventeen.", " the moon."]


def test_it_ranks_the_right_answer_first(llama, client, make_user):
    client.force_login(make_user())
    model = httpx.get(f"{llama}/v1/models").json()["data"][0]["id"]
    response = client.post(
        "/inspect/choices/",
        {"model": model, "prefix": "The capital of France is", "add_special_tokens": "on",
         "candidates": "\n".join(CANDIDATES)},
    )  # fmt: skip
    assert response.status_code == 302
    (generation,) = Generation.objects.filter(kind="inspect")  # one request for all four
    assert len(generation.params["prompt"]) == len(CANDIDATES)
    scores = generation.target["scores"]
    assert scores[0]["text"] == " Paris."
    assert scores[0]["mean"] > max(s["mean"] for s in scores[1:])
    # Only continuation tokens count: " Paris." is a couple of tokens, not the prefix too.
    assert 1 <= scores[0]["tokens"] <= 3
    page = client.get(response["Location"]).text
    assert page.index("Paris.") < page.index("a·banana.")
