"""Compare: the same text after two prefixes, one batched request, per-token Δ."""

import re

import pytest

from completions.models import Generation
from tests.inspector.conftest import received

pytestmark = pytest.mark.django_db


def test_it_compares_two_prefixes(scripted, client, make_user):
    client.force_login(make_user())
    text = " the cat sat on the mat"
    response = client.post(
        "/inspect/compare/",
        {"model": "scripted", "model_b": "scripted", "text": text, "prefix_a": "Once upon a time,",
         "prefix_b": "The dog ran.", "add_special_tokens": "on"},
    )  # fmt: skip
    assert response.status_code == 302
    sent = received(scripted)
    assert len(sent) == 1
    assert sent[0]["body"]["prompt"] == ["Once upon a time," + text, "The dog ran." + text]

    target = Generation.objects.get(kind="inspect").target
    pairs = target["pairs"]
    # Only the text's own tokens are compared, in order.
    assert "".join(a["text"] for a, _ in pairs) == text
    for a, b in pairs:
        assert a["text"] == b["text"] and a["id"] == b["id"]
    deltas = [row["delta"] for row in target["rows"]]
    assert deltas == [pytest.approx(b["logprob"] - a["logprob"]) for a, b in pairs]
    # The scripted model conditions on the last two tokens: the first text tokens
    # differ between prefixes, later ones not.
    assert deltas[0] != 0 and deltas[-1] == pytest.approx(0)
    page = client.get(response["Location"]).text
    # One chip per pair in the shared token view (its popover, not a second one).
    chips = re.findall(r'<span class="tok [^"]*\bd[0-4x]\b[^"]*"[^>]*>', page)
    assert len(chips) == len(pairs)
    assert all("data-alts=" in c and 'data-info="Δ ' in c for c in chips)
    assert 'class="tip"' not in page
