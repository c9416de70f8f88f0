"""The Choices CSV's top1_logprob is the model's favourite token's logprob,
not the scored token's own (they are equal only where the token was rank 1)."""

import csv
import io

import pytest

from inspector import scoring

pytestmark = pytest.mark.django_db


def test_it_exports_the_favourites_logprob_for_every_choice_token(scripted, client, make_user):
    client.force_login(make_user())
    response = client.post(
        "/inspect/choices/",
        {"model": "scripted", "prefix": "The owl", "add_special_tokens": "on",
         "candidates": " sang in the night\n zq xv wk\n the the the"},
    )  # fmt: skip
    assert response.status_code == 302, response.text
    url = response["Location"]
    rows = list(csv.DictReader(io.StringIO(client.get(f"{url}export.csv").text)))
    assert rows
    below_top = [r for r in rows if int(r["rank"]) > 1]
    assert below_top, "the candidates should hold tokens the model did not favour"
    for r in rows:
        own, top1 = float(r["logprob"]), float(r["top1_logprob"])
        if int(r["rank"]) == 1:
            assert top1 == own
        else:
            assert top1 > own, r


def test_it_leaves_top1_unknown_when_the_answer_does_not_hold_it():
    entry = {"7": {"logprob": -3.0, "rank": 4, "decoded_token": "x"}}
    row = scoring.parse_position(1, entry)
    assert row.top1_logprob is None and row.delta_top1 is None
    entry["9"] = {"logprob": -0.5, "rank": 1, "decoded_token": "y"}
    assert scoring.parse_position(1, entry).top1_logprob == -0.5
