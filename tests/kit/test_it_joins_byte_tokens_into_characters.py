"""Byte-level tokens that are only part of a character (the real SmolLM2 tokenizer
splits "😀", "日" and "語" over two or three tokens, each shown alone as "�") are
merged until they cover whole characters of the text, with their combined
probability: no muted "�" pieces, and the chips join to exactly the text."""

import math
import re

import pytest

from core.tokens import REPLACEMENT, LiveChips, chips_for
from tests.kit.conftest import logprobs_for
from workbench.display import sample_views

TEXT = "Café 😀 日本語 ok"


@pytest.fixture(scope="module")
def pieces(smollm2):
    ids = smollm2.tokenize(TEXT, add_special_tokens=False)
    assert smollm2.decode(ids) == TEXT
    got = [smollm2.token_piece(i) for i in ids]
    assert sum(REPLACEMENT in p for p in got) >= 6, got  # the case this test is about
    return got


def test_it_merges_the_pieces_of_a_character_with_their_combined_probability(pieces):
    probs = [0.9 - 0.05 * i for i in range(len(pieces))]
    chips = chips_for(TEXT, logprobs_for(pieces, probs))
    assert "".join(c.text for c in chips) == TEXT
    assert all(c.in_text and REPLACEMENT not in c.text for c in chips)
    merged = {c.text: c for c in chips}
    for char in (" 😀", " 日", "語"):
        chip = merged[char]
        width = next(
            k
            for k in range(2, 5)
            if REPLACEMENT in pieces[chip.index + k - 1]
            and (
                chip.index + k == len(pieces) or not pieces[chip.index + k].startswith(REPLACEMENT)
            )
        )
        expected = sum(math.log(p) for p in probs[chip.index : chip.index + width])
        assert chip.logprob == pytest.approx(expected)
    # The alternatives are the first piece's: where a branch would start.
    assert merged[" 😀"].alternatives[0][0] == pieces[merged[" 😀"].index]


def test_it_shows_no_replacement_pieces_in_the_workbench(pieces):
    lp = logprobs_for(pieces, [0.5] * len(pieces))
    (view,) = sample_views([{"index": 0, "text": TEXT, "logprobs": lp}])
    html = view.tokens_html
    shown = re.findall(r">([^<]*)</span>", html)
    assert "".join(shown) == TEXT and not any(REPLACEMENT in s for s in shown)
    assert "tok extra" not in html
    assert [c.text for c in view.tokens] == ["C", "af", "é", " 😀", " 日", "本", "語", " ok"]
    assert html.count('class="tok p') == 8


def test_it_joins_characters_the_same_way_while_streaming(pieces):
    """Chunk by chunk as the engine streams them: a split character's text arrives
    with its last piece, earlier pieces come with no text."""
    live, chips, emitted = LiveChips(), [], 0
    lp = logprobs_for(pieces, [0.5] * len(pieces))
    for k in range(len(pieces)):
        done = k + 1 == len(pieces) or not pieces[k + 1].startswith(REPLACEMENT)
        text = ""
        if done:  # the decoder emits text once its character is whole
            target = chips_for(TEXT, lp)
            end = sum(len(c.text) for c in target if c.index is not None and c.index <= k)
            text, emitted = TEXT[emitted:end], end
        one = {key: [lp[key][k]] for key in ("tokens", "token_logprobs", "top_logprobs")}
        chips += live.feed(text, one)
    chips += live.flush()
    assert [(c.text, c.index) for c in chips] == [(c.text, c.index) for c in chips_for(TEXT, lp)]
