"""Helpers for browser tests of the shared charts (core/charts.py, static/weft/charts.js)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any


def chart_entry(page: Any, figure: Any) -> dict:
    """The spec the figure was drawn from (its json_script), once charts.js drew it."""
    figure.locator("canvas").first.wait_for()
    return json.loads(figure.locator("script[type='application/json']").text_content())


def canvas_ink(page: Any, figure: Any) -> float:
    """The share of the plot's canvas pixels that are drawn on (not transparent). A
    figure the page re-renders meanwhile (a live chart) is measured once redrawn."""
    for _ in range(50):
        ink = figure.evaluate(
            """fig => {
                const c = fig.querySelector('.chart-plot canvas');
                if (!c) return null;
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                let ink = 0;
                for (let i = 3; i < d.length; i += 4) if (d[i] > 0) ink++;
                return ink / (c.width * c.height);
            }"""
        )
        if ink is not None:
            return ink
        page.wait_for_timeout(100)
    raise AssertionError("the chart was never drawn")


def open_png(page: Any, path: str | Path) -> tuple[int, int]:
    """Open a downloaded PNG as an image in the page: its (width, height)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    size = page.evaluate(
        """url => new Promise((done, fail) => {
            const img = new Image();
            img.onload = () => done([img.naturalWidth, img.naturalHeight]);
            img.onerror = () => fail(new Error('not an image'));
            img.src = url;
        })""",
        url,
    )
    return size[0], size[1]


def watch_errors(page: Any) -> list[str]:
    """The page's uncaught script errors from now on (a chart that throws draws nothing)."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors
