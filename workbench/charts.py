"""The Workbench's charts (core/charts.py): each sampled token's probability along a
sample, one small chart per sample sharing one cursor, marked where the sample first
leaves the others (display.divergence_points) — and on the compare page each pair of
samples overlaid, marked where they part (display.compare_pairs). Points and token
chips link both ways by the chips' token index (data-i)."""

from __future__ import annotations

from typing import Any

from core.charts import Chart, Mark, Series
from core.tokens import Chip, visible_text
from workbench.display import ComparedPair, SampleView

PROBABILITY = "probability of the sampled token"


def _points(chips: list[Chip] | None) -> list[Chip]:
    """The chips that stand for sampled tokens with a logprob, in order."""
    return [c for c in chips or [] if c.index is not None and c.logprob is not None]


def _at(point: Chip) -> int:
    """A point's token index (_points keeps only chips that have one)."""
    assert point.index is not None
    return point.index


def _split(chips: list[Chip]) -> int | None:
    return next((c.index for c in chips if c.diverges), None)


def _name(chip: Chip) -> str:
    return visible_text(chip.text) if chip.in_text else chip.text


def sample_charts(samples: list[SampleView], key: Any) -> list[Chart]:
    """One chart per sample that has logprobs (none for a run without them)."""
    charts = []
    for sample in samples:
        points = _points(sample.tokens)
        if not points:
            continue
        split = _split(points)
        charts.append(
            Chart(
                id=f"chart-wb-{key}-{sample.index}",
                title=f"Sample #{sample.index}",
                x=[_at(c) for c in points],
                x_names=[_name(c) for c in points],
                names_label="token",
                x_label="token",
                y_label="p",
                series=[Series(PROBABILITY, [c.prob for c in points], style="line", decimals=3)],
                marks=[] if split is None else [Mark(split, "leaves the others")],
                links=[
                    {
                        "target": f'#gen-{key}-result .sample[data-index="{sample.index}"]',
                        "attr": "i",
                    }
                ],
                sync=f"wb-{key}",
                y_range=(0.0, 1.0),
                height=150,
                filename=f"run-{key}-sample-{sample.index}-probabilities",
            )
        )
    return charts


def pair_chart(pair: ComparedPair, a_key: Any, b_key: Any) -> Chart | None:
    """A's and B's sample #i over token position, marked where each parts from the
    other; None unless both have logprobs."""
    a = _points(pair.a.tokens if pair.a else None)
    b = _points(pair.b.tokens if pair.b else None)
    if not a or not b:
        return None
    positions = sorted({_at(c) for c in a} | {_at(c) for c in b})
    by_a = {_at(c): c for c in a}
    by_b = {_at(c): c for c in b}
    names = [_name(by_a[i]) if i in by_a else _name(by_b[i]) for i in positions]
    marks = []
    split_a, split_b = _split(a), _split(b)
    if split_a is not None:
        marks.append(Mark(split_a, "A and B part" if split_a == split_b else "A parts"))
    if split_b is not None and split_b != split_a:
        marks.append(Mark(split_b, "B parts"))
    side = f'.compare-pair[data-index="{pair.index}"] .compare-side[data-side="%s"]'
    return Chart(
        id=f"chart-compare-{pair.index}",
        title=f"Sample #{pair.index}: A and B",
        caption="the token names are A's (B's where A has none)",
        x=positions,
        x_names=names,
        names_label="token (A)",
        x_label="token",
        y_label="p",
        series=[
            Series(
                f"A · run {a_key}",
                [by_a[i].prob if i in by_a else None for i in positions],
                style="line",
                decimals=3,
            ),
            Series(
                f"B · run {b_key}",
                [by_b[i].prob if i in by_b else None for i in positions],
                style="dash",
                decimals=3,
            ),
        ],  # fmt: skip
        marks=marks,
        links=[{"target": side % "A", "attr": "i"}, {"target": side % "B", "attr": "i"}],
        y_range=(0.0, 1.0),
        height=170,
        filename=f"compare-{a_key}-{b_key}-sample-{pair.index}",
    )
