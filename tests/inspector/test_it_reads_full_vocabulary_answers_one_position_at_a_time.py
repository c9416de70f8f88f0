"""A full-vocabulary answer is read from the HTTP response one position at a
time and reduced to what the page shows: the web process never holds the body
(its peak memory stays a small fraction of the body's size), the checkpoint keeps
each position's actual token and best few, and entropy and rank still come from
the whole distribution. What cannot be scored is refused before sending."""

import json
import tracemalloc

import httpx
import numpy as np
import pytest

from completions.models import Generation
from inspector import scoring
from tests.inspector.conftest import received

pytestmark = pytest.mark.django_db

TEXT = "The owl sang to the moon and the cat sat on the mat. " * 45  # ~600 tokens


def whole_answer(base: str) -> tuple[list, bytes]:
    body = {"model": "scripted", "prompt": TEXT, "max_tokens": 1, "echo": True,
            "prompt_logprobs": -1}  # fmt: skip
    response = httpx.post(f"{base}/v1/completions", json=body, timeout=120)
    return response.json()["choices"][0]["prompt_logprobs"], response.content


def peak_of(fn) -> int:
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def test_it_scores_the_whole_vocabulary_without_holding_the_body(scripted, client, make_user):
    plp, raw = whole_answer(scripted)
    assert len(plp) > 500 and len(plp[1]) == 687  # every position: the whole vocabulary
    client.force_login(make_user())
    form = {"source": "text", "model": "scripted", "k": "5", "full_vocab": "on",
            "add_special_tokens": "on", "text": "warm up"}  # fmt: skip
    client.post("/inspect/score/", form)  # the first request loads templates, URLs, …
    Generation.objects.all().delete()
    responses = []
    peak = peak_of(lambda: responses.append(client.post("/inspect/score/", {**form, "text": TEXT})))
    response = responses[0]
    assert response.status_code == 302, response.text[:2000]
    # Side by side: what parsing the body whole costs (the old path did that, and more).
    whole = peak_of(lambda: json.loads(raw))
    print(f"body {len(raw):,} B; whole request peak {peak:,} B; json.loads alone {whole:,} B")
    assert peak < whole / 5

    generation = Generation.objects.get(kind="inspect")
    # Settled on the backend's own usage, read from the end of the body.
    assert generation.usage["prompt_tokens"] == len(plp) and generation.served_model
    stored = generation.choices[0]["prompt_logprobs"]
    assert len(stored) == len(plp)
    assert all(len(entries) <= scoring.FULL_VOCAB_SHOWN + 1 for entries in stored[1:])
    rows = generation.target["rows"]
    for row, entries in zip(rows[1:], plp[1:], strict=True):
        lps = np.array([e["logprob"] for e in entries.values()], dtype=np.float64)
        p = np.exp(lps - lps.max())
        p /= p.sum()
        nz = p[p > 0]
        assert row["entropy_bits"] == pytest.approx(float(-(nz * np.log2(nz)).sum()), abs=1e-6)
        actual = entries[str(row["id"])]["logprob"]
        assert row["rank"] == int((lps > actual).sum()) + 1
        assert [a["logprob"] for a in row["top"]] == sorted(lps, reverse=True)[: len(row["top"])]
    page = client.get(response["Location"]).text
    assert f"entropy {rows[1]['entropy_bits']:.2f} bits" in page


def test_it_refuses_a_prompt_too_long_for_the_full_vocabulary(scripted, client, make_user):
    client.force_login(make_user())
    response = client.post(
        "/inspect/score/",
        {"source": "text", "model": "scripted", "k": "5", "full_vocab": "on",
         "add_special_tokens": "on", "text": TEXT * 3},
    )  # fmt: skip
    assert response.status_code == 400 and "at most 1,024 tokens" in response.text
    assert received(scripted) == [] and not Generation.objects.exists()
