"""The shared chart description (core/charts.py): round bins that hold every value by
the same lo <= v < hi test a filter makes, and a spec whose table (the text
alternative) shows the same numbers the plot gets."""

import json
import random

from django.template.loader import render_to_string

from core.charts import Chart, Mark, Series, histogram


def test_it_bins_every_value_in_round_bins():
    rng = random.Random(7)
    values = [rng.uniform(-7.3, -0.2) for _ in range(500)] + [-7.3, -0.2, -5.0]
    hist = histogram(values, bins=20)
    assert sum(hist.counts) == len(values)
    assert len(hist.edges) == len(hist.counts) + 1
    width = hist.edges[1] - hist.edges[0]
    assert width in (0.2, 0.5)  # a round width giving about 20 bins
    for k, count in enumerate(hist.counts):
        lo, hi = hist.edges[k], hist.edges[k + 1]
        assert count == sum(1 for v in values if lo <= v < hi)
    # The filter value of each bin reads back as its edges.
    assert [tuple(map(float, p.split(":"))) for p in hist.params()] == list(
        zip(hist.edges, hist.edges[1:], strict=False)
    )


def test_it_bins_integers_by_whole_numbers():
    hist = histogram([1, 2, 2, 10, 10, 10], bins=20, integer=True)
    assert hist.edges[0] == 1 and hist.edges[-1] == 11
    assert hist.counts[0] == 1 and hist.counts[1] == 2 and hist.counts[-1] == 3
    assert hist.names()[1] == "2" and hist.params()[1] == "2:3"
    wide = histogram(list(range(0, 400)), bins=20, integer=True)
    assert wide.names()[0] == "0–19" and sum(wide.counts) == 400
    assert histogram([], bins=5).counts == []


def test_it_renders_the_same_numbers_as_a_table_and_a_spec():
    chart = Chart(
        id="chart-t",
        title="Surprisal <b>",
        x=[0, 1, 2],
        x_names=["<s>", "·a", "b"],
        names_label="token",
        x_label="position",
        y_label="bits",
        series=[Series("surprisal", [None, 1.23456, 2.5], unit="bits")],
        marks=[Mark(1, "here")],
    )
    html = render_to_string("kit/_chart.html#chart", {"chart": chart})
    assert "<b>" not in html and "&lt;s&gt;" in html  # escaped, labels included
    assert '<th scope="col">surprisal (bits)</th>' in html
    assert "<td>1.23</td>" in html and "<td>—</td>" in html
    spec = json.loads(html.split('<script type="application/json">')[1].split("</script>")[0])
    assert spec["series"][0]["values"] == [None, 1.2346, 2.5]
    assert spec["x_names"][0] == "<s>" and spec["marks"] == [{"x": 1, "label": "here"}]
    assert 'role="img"' in html and "surprisal from 1.23 to 2.50 bits" in html
