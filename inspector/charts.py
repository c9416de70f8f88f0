"""Inspect's charts (core/charts.py draws them; the token chips link to their points):
surprisal per token with its running total, entropy for full-vocabulary scorings, and
a compare's two surprisal lines with their difference."""

from __future__ import annotations

from itertools import accumulate
from typing import Any

from core.charts import Chart, Series
from core.tokens import visible_text
from inspector.scoring import DeltaRow, TokenRow


def _name(row: TokenRow) -> str:
    shown = visible_text(row.text) if row.text else ""
    return "BOS" if row.special and not shown else shown


def cumulative_bits(rows: list[TokenRow]) -> list[float]:
    """The running total of surprisal: the information in the text up to each token."""
    return list(accumulate(r.bits or 0.0 for r in rows))


def surprisal_chart(rows: list[TokenRow], *, full_vocab: bool, key: Any) -> Chart:
    """−log2 p of each token along the text, the cumulative total (the text's
    information so far, on the right axis) and, with the whole vocabulary, the entropy
    of each position's distribution (what the model expected to be surprised by)."""
    series = [
        Series("surprisal", [r.bits for r in rows], unit="bits", style="line"),
        Series(
            "cumulative surprisal",
            cumulative_bits(rows),
            unit="bits",
            style="dash",
            axis="y2",
            decimals=1,
        ),
    ]
    if full_vocab:
        series.append(Series("entropy", [r.entropy_bits for r in rows], unit="bits", style="dot"))
    return Chart(
        id=f"chart-inspect-{key}",
        title="Surprisal per token",
        caption="−log₂ p of each token given the text before it; hover a point or a token.",
        x=[r.position for r in rows],
        x_names=[_name(r) for r in rows],
        names_label="token",
        x_ticks="both",
        x_label="token position",
        y_label="surprisal (bits)",
        y2_label="cumulative (bits)",
        series=series,
        links=[{"target": "#tokens", "attr": "pos"}],
        filename=f"inspect-{key}-surprisal",
        table_elsewhere="token-table",
        height=240,
    )


def compare_chart(pairs: list[DeltaRow], labels: list[str], *, key: Any) -> Chart:
    """The shared tokens' surprisal under A and under B, and B − A (below zero: the
    token was more likely under B, as the chips' green says)."""
    a = [p.a.bits for p in pairs]
    b = [p.b.bits for p in pairs]
    diff = [None if x is None or y is None else y - x for x, y in zip(a, b, strict=True)]
    label_a, label_b = (labels + ["A", "B"])[:2]
    return Chart(
        id=f"chart-compare-{key}",
        title="Surprisal under A and B",
        caption=f"A = {label_a}; B = {label_b}; bars: B − A (below 0: more likely under B).",
        x=list(range(len(pairs))),
        x_names=[visible_text(p.a.text) for p in pairs],
        names_label="token",
        x_ticks="both",
        x_label="shared token",
        y_label="surprisal (bits)",
        series=[
            Series("A", a, unit="bits", style="line"),
            Series("B", b, unit="bits", style="dash"),
            Series("B − A", diff, unit="bits", style="bars"),
        ],
        links=[{"target": "#tokens", "attr": "pair"}],
        filename=f"inspect-{key}-compare",
        height=240,
    )
