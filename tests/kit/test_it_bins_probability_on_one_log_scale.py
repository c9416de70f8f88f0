"""One colour map for every page: half a decade per bin, on a log scale, with the
legend's labels taken from the same bins."""

import math

import pytest

from core.tokens import BINS, LEGEND, Chip, chip_html, prob_bin


@pytest.mark.parametrize(
    ("p", "expected"),
    [(1.0, 0), (0.9, 0), (0.32, 0), (0.3, 1), (0.1, 1), (0.09, 2), (0.031, 3), (0.01, 3),
     (0.009, 4), (1e-3, 5), (1e-4, 7), (1e-9, 7)],
)  # fmt: skip
def test_it_bins_probability_by_half_decades(p, expected):
    assert prob_bin(math.log(p)) == expected


def test_it_has_no_bin_without_a_logprob():
    assert prob_bin(None) is None
    assert prob_bin(float("nan")) is None
    assert prob_bin(-9999.0) == BINS - 1  # vLLM's -inf


def test_it_labels_the_legend_with_the_bins_edges():
    assert [b for b, _ in LEGEND] == list(range(BINS))
    assert LEGEND[0][1] == "≥ 0.32" and LEGEND[1][1] == "≥ 0.1" and LEGEND[-1][1].startswith("<")
    for b, _label in LEGEND[:-1]:
        edge = 10 ** (-(b + 1) / 2)
        assert prob_bin(math.log(edge * 1.001)) == b
        assert prob_bin(math.log(edge * 0.999)) == b + 1


def test_it_escapes_every_string_in_a_chip():
    html = chip_html(Chip("<b>&", -0.5, index=0, alternatives=[('"><i>', 0.5, True)], info="<x>"))
    assert "<b>" not in html and "<i>" not in html and "<x>" not in html
    assert "&lt;b&gt;&amp;" in html and 'class="tok p0"' in html
