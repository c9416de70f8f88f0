"""On the real model: the ids and logprobs on the page equal the engine's answer to
the same request, and the first position (no logprob) is labelled from /tokenize."""

import httpx
import pytest

from completions.models import Generation
from tests.inspector.conftest import chips

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

TEXT = "The quick brown fox jumps over the lazy dog."


def test_it_shows_the_engines_ids_and_logprobs(llama, client, make_user):
    client.force_login(make_user())
    model = httpx.get(f"{llama}/v1/models").json()["data"][0]["id"]
    response = client.post(
        "/inspect/score/",
        {"source": "text", "model": model, "k": "5", "add_special_tokens": "on", "text": TEXT},
        follow=True,
    )
    assert response.status_code == 200
    shown = chips(response.text)

    body = {"model": model, "prompt": TEXT, "max_tokens": 1, "echo": True,
            "prompt_logprobs": 5, "add_special_tokens": True}  # fmt: skip
    answer = httpx.post(f"{llama}/v1/completions", json=body, timeout=60).json()
    plp = answer["choices"][0]["prompt_logprobs"]
    ids = httpx.post(f"{llama}/tokenize", json={"model": model, "prompt": TEXT}).json()["tokens"]

    assert len(shown) == len(plp) == len(ids)
    # First position: its id from /tokenize, no logprob.
    assert shown[0] == (0, ids[0], None)
    for (_pos, tid, lp), entries in zip(shown[1:], plp[1:], strict=True):
        actual = next(iter(entries))  # the engine lists the actual token first
        assert tid == int(actual)
        assert lp == entries[actual]["logprob"]
    # The same request went through the door and landed in a checkpoint.
    generation = Generation.objects.get(kind="inspect")
    assert generation.state == "done"
    assert generation.params["prompt_logprobs"] == 5
    assert generation.params["max_tokens"] == 1 and generation.params["echo"] is True
