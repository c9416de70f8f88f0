"""The charts every page shares: a chart is data, described here once, drawn by
static/weft/charts.js (uPlot, vendored under static/vendor/uplot/) inside
templates/kit/_chart.html, which also renders the same numbers as a table — the
text alternative, readable without the script and without colour.

A page builds a `Chart` from its own domain rows (inspector/charts.py,
workbench/charts.py, batch/charts.py, usage/charts.py) and includes the kit
partial with it. The spec reaches the browser through `json_script` (escaped), and
charts.js writes labels only to a canvas or with textContent: model-written tokens
used as labels are never markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Style = Literal["line", "dash", "dot", "step", "bars", "points"]
Kind = Literal["line", "bars"]


def _rounded(value: float | None, decimals: int) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), decimals)


@dataclass
class Series:
    """One line or set of bars. `style` tells the series apart without colour: a dash
    pattern for lines, a hatching for bars (charts.js), and the label in the legend,
    the readout and the table."""

    label: str
    values: Sequence[float | None]
    unit: str = ""
    style: Style = "line"
    axis: Literal["y", "y2"] = "y"
    decimals: int = 2

    def spec(self) -> dict[str, Any]:
        # Two more decimals than shown: the exported CSV keeps them.
        keep = self.decimals + 2
        return {
            "label": self.label,
            "unit": self.unit,
            "style": self.style,
            "axis": self.axis,
            "decimals": self.decimals,
            "values": [_rounded(v, keep) for v in self.values],
        }

    def shown(self, i: int) -> str:
        value = self.values[i] if i < len(self.values) else None
        if value is None or not math.isfinite(value):
            return "—"
        return f"{value:,.{self.decimals}f}"


@dataclass
class Mark:
    """A labelled vertical line at x (a first divergence, today)."""

    x: float
    label: str


@dataclass
class Chart:
    """A chart with its axes, units and labels. `x` holds the positions and `x_names`
    what each is called (a token, a day, a bin): tick labels, the readout, the table's
    first column and the CSV's."""

    id: str
    title: str
    x: Sequence[float]
    series: list[Series]
    x_label: str
    y_label: str
    y2_label: str = ""
    x_names: Sequence[str] | None = None
    names_label: str = ""  # what an x name is ("token", "day"): the CSV's and table's column
    # Tick labels: "numbers" (x), "names" (x_names: bins), "both" (a position over its token).
    x_ticks: Literal["numbers", "names", "both"] = "numbers"
    tick_names: Sequence[str] | None = None  # shorter tick labels than x_names (bin edges)
    kind: Kind = "line"
    stacked: bool = False  # bars drawn on top of one another (totals per x)
    marks: list[Mark] = field(default_factory=list)
    # Token chips on the page this chart points at and back: [{"target": CSS selector
    # of their container, "attr": the data-* attribute holding x}].
    links: list[dict[str, str]] = field(default_factory=list)
    # A click (or Enter) on a bar loads `url` with `param` = values[bar] into `target`.
    filter: dict[str, Any] | None = None
    sync: str = ""  # charts with the same key share the cursor (small multiples)
    height: int = 220
    y_range: tuple[float, float] | None = None
    filename: str = "chart"
    # Where the same numbers are already shown as a table (Inspect's token table):
    # the kit then links there instead of repeating them.
    table_elsewhere: str = ""
    caption: str = ""

    @property
    def has_data(self) -> bool:
        return any(v is not None for s in self.series for v in s.values)

    def spec(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "kind": self.kind,
            "stacked": self.stacked,
            "x": list(self.x),
            "x_label": self.x_label,
            "x_names": list(self.x_names) if self.x_names is not None else None,
            "names_label": self.names_label,
            "x_ticks": self.x_ticks,
            "tick_names": list(self.tick_names) if self.tick_names is not None else None,
            "y_label": self.y_label,
            "y2_label": self.y2_label,
            "series": [s.spec() for s in self.series],
            "marks": [{"x": m.x, "label": m.label} for m in self.marks],
            "links": self.links,
            "filter": self.filter,
            "sync": self.sync,
            "height": self.height,
            "y_range": list(self.y_range) if self.y_range else None,
            "filename": self.filename,
        }

    def x_shown(self, i: int) -> str:
        value = self.x[i]
        return str(int(value)) if float(value).is_integer() else f"{value:g}"

    @property
    def headers(self) -> list[str]:
        names = [self.names_label or "label"] if self.x_names is not None else []
        units = [f"{s.label} ({s.unit})" if s.unit else s.label for s in self.series]
        return [self.x_label, *names, *units]

    @property
    def rows(self) -> list[list[str]]:
        """The text alternative: one row per x, each series' value as shown."""
        out = []
        for i in range(len(self.x)):
            names = [self.x_names[i]] if self.x_names is not None else []
            out.append([self.x_shown(i), *names, *(s.shown(i) for s in self.series)])
        return out

    @property
    def summary(self) -> str:
        """What a screen reader hears on the plot: the title, the axes, the extent."""
        parts = [f"{self.title}: {', '.join(s.label for s in self.series)}"]
        parts.append(f"over {len(self.x)} points of {self.x_label}")
        for s in self.series:
            known = [v for v in s.values if v is not None and math.isfinite(v)]
            if known:
                unit = f" {s.unit}" if s.unit else ""
                parts.append(
                    f"{s.label} from {min(known):,.{s.decimals}f} to {max(known):,.{s.decimals}f}{unit}"
                )
        return "; ".join(parts) + ". Arrow keys move along it; the table has every value."


# --------------------------------------------------------------------------- binning


@dataclass
class Histogram:
    """Counts per bin; `edges` has one more entry than `counts`. A bin holds
    lo <= v < hi (the top edge lies above the largest value)."""

    edges: list[float]
    counts: list[int]
    integer: bool

    def names(self) -> list[str]:
        out = []
        for lo, hi in zip(self.edges, self.edges[1:], strict=False):
            if self.integer:
                top = int(hi) - 1
                out.append(f"{int(lo)}" if top == int(lo) else f"{int(lo)}–{top}")
            else:
                out.append(f"{lo:g} to {hi:g}")
        return out

    def ticks(self) -> list[str]:
        """Short tick labels: an integer bin's name, a real one's lower edge."""
        return self.names() if self.integer else [f"{lo:g}" for lo in self.edges[:-1]]

    def params(self) -> list[str]:
        """Each bin as a filter value (batch.charts reads it back): "lo:hi"."""
        return [f"{lo!r}:{hi!r}" if not self.integer else f"{int(lo)}:{int(hi)}"
                for lo, hi in zip(self.edges, self.edges[1:], strict=False)]  # fmt: skip


def _nice_step(span: float, bins: int) -> float:
    """A round bin width (1, 2 or 5 × a power of ten) giving about `bins` bins."""
    raw = span / max(1, bins)
    if raw <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def histogram(values: Sequence[float], *, bins: int = 20, integer: bool = False) -> Histogram:
    """Counts of `values` in about `bins` bins of a round width; the lowest edge is a
    multiple of the width and the highest lies above the largest value, so every
    value falls in a bin by lo <= v < hi (the same test the filter makes)."""
    if not values:
        return Histogram([], [], integer)
    lo_v, hi_v = min(values), max(values)
    step = _nice_step(hi_v - lo_v, bins)
    if integer:
        step = max(1.0, math.ceil(step))
    start = math.floor(lo_v / step) * step
    count = int((hi_v - start) // step) + 1
    decimals = max(0, -math.floor(math.log10(step))) + 1 if step < 1 else 0
    edges = [round(start + k * step, decimals) for k in range(count + 1)]
    counts = [0] * count
    for v in values:
        k = min(count - 1, max(0, int((v - start) // step)))
        # The rounded edges decide, as the filter's comparisons will.
        while k > 0 and v < edges[k]:
            k -= 1
        while k < count - 1 and v >= edges[k + 1]:
            k += 1
        counts[k] += 1
    return Histogram(edges, counts, integer)
