"""On the real model: with the full vocabulary, each position's entropy and rank equal
what the returned distribution gives when computed independently (numpy)."""

import httpx
import numpy as np
import pytest

from completions.models import Generation
from inspector import scoring

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

TEXT = "Once upon a time"


def _full_vocab_answer(base: str, model: str) -> list:
    body = {"model": model, "prompt": TEXT, "max_tokens": 1, "echo": True, "prompt_logprobs": -1}
    response = httpx.post(f"{base}/v1/completions", json=body, timeout=180)
    return response.json()["choices"][0]["prompt_logprobs"]


def _check(rows: list[dict], plp: list) -> None:
    assert rows[0]["logprob"] is None and rows[0]["entropy_bits"] is None
    for row, entries in zip(rows[1:], plp[1:], strict=True):
        lps = np.array([e["logprob"] for e in entries.values()], dtype=np.float64)
        assert len(lps) > 40_000  # really the whole vocabulary
        p = np.exp(lps)
        p /= p.sum()
        nz = p[p > 0]
        assert row["entropy_bits"] == pytest.approx(float(-(nz * np.log2(nz)).sum()), abs=1e-6)
        actual = entries[str(row["id"])]["logprob"]
        assert row["rank"] == int((lps > actual).sum()) + 1


def test_it_computes_entropy_from_the_real_distribution(llama):
    model = httpx.get(f"{llama}/v1/models").json()["data"][0]["id"]
    plp = _full_vocab_answer(llama, model)
    ids = httpx.post(f"{llama}/tokenize", json={"model": model, "prompt": TEXT}).json()["tokens"]
    rows = scoring.build_rows(plp, tokenized=ids, prompt_text=TEXT, full_vocab=True)
    _check([r.as_dict() for r in rows], plp)


def test_it_shows_full_vocabulary_entropy_on_the_page(llama, client, make_user):
    client.force_login(make_user())
    model = httpx.get(f"{llama}/v1/models").json()["data"][0]["id"]
    response = client.post(
        "/inspect/score/",
        {"source": "text", "model": model, "k": "5", "full_vocab": "on",
         "add_special_tokens": "on", "text": TEXT},
    )  # fmt: skip
    assert response.status_code == 302
    rows = Generation.objects.get(kind="inspect").target["rows"]
    _check(rows, _full_vocab_answer(llama, model))
    page = client.get(response["Location"]).text
    assert f"entropy {rows[1]['entropy_bits']:.2f} bits" in page
