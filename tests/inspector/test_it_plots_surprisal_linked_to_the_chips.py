"""Inspect's surprisal plot in real Chromium, with real scorings (the scripted engine):
axes and token labels drawn, the point under the cursor outlines its chip and a chip
under the mouse moves the cursor to its point, the keyboard walks along it, entropy is
plotted for a full-vocabulary scoring, a compare overlays both sides and their
difference, and the figure and its data download as PNG and CSV that open."""

import csv
import io

import pytest
from playwright.sync_api import expect

from tests.charts import canvas_ink, chart_entry, open_png, watch_errors

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

TEXT = "The owl sang to the moon and the cat ran over the old mill by the river."


def test_it_plots_surprisal_linked_to_the_chips(
    scripted_web, make_user, page, login, artifacts_dir
):
    errors = watch_errors(page)
    make_user("iris")
    login(scripted_web, "iris")
    page.goto(f"{scripted_web}/inspect/")
    page.get_by_label("Text to score").fill(TEXT)
    page.get_by_label("Full vocabulary (entropy, exact rank)").check()
    page.locator("#form-score").get_by_role("button", name="Score").click()
    figure = page.locator("figure.weft-chart")
    expect(figure.locator("canvas").first).to_be_visible()
    chips = page.locator("#tokens .tok")
    count = chips.count()
    assert count > 15

    entry = chart_entry(page, figure)
    assert [s["label"] for s in entry["series"]] == ["surprisal", "cumulative surprisal", "entropy"]
    assert entry["x"] == list(range(count))
    assert canvas_ink(page, figure) > 0.02  # lines, axes and labels, not a blank canvas
    expect(figure.locator(".chart-legend")).to_contain_text("entropy (bits)")
    page.screenshot(path=artifacts_dir / "inspect-surprisal-chart.png", full_page=True)

    # Chart → chip: the cursor over a point outlines that token.
    over = figure.locator(".u-over")
    box = over.bounding_box()
    over.hover(position={"x": box["width"] * 0.5, "y": box["height"] * 0.5})
    hit = page.locator("#tokens .tok.chart-hit")
    expect(hit).to_have_count(1)
    position = int(hit.get_attribute("data-pos"))
    readout = figure.locator(".chart-readout")
    expect(readout).to_contain_text(f"token position {position}")
    expect(readout).to_contain_text("surprisal")
    expect(readout).to_contain_text("entropy")
    page.screenshot(path=artifacts_dir / "inspect-chart-hover.png")

    # Chip → chart: hovering a chip puts the cursor on its point.
    chips.nth(7).hover()
    assert (
        page.evaluate("id => weft.charts.entry(id).u.cursor.idx", figure.get_attribute("id")) == 7
    )
    expect(readout).to_contain_text("token position 7")
    assert "chart-hit" in chips.nth(7).get_attribute("class")

    # The keyboard: focus the plot, walk along it.
    figure.locator(".chart-plot").focus()
    page.keyboard.press("Home")
    expect(readout).to_contain_text("token position 0")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    expect(readout).to_contain_text("token position 2")
    assert "chart-hit" in chips.nth(2).get_attribute("class")

    # Exports: a PNG that opens as an image, a CSV with the page's numbers.
    with page.expect_download() as png:
        figure.get_by_role("button", name="PNG").click()
    assert png.value.suggested_filename.endswith("-surprisal.png")
    width, height = open_png(page, png.value.path())
    assert width > 300 and height > 200
    with page.expect_download() as data:
        figure.get_by_role("button", name="CSV").click()
    rows = list(csv.DictReader(io.StringIO(data.value.path().read_text())))
    assert len(rows) == count
    assert list(rows[0]) == ["token position", "token", "surprisal (bits)",
                             "cumulative surprisal (bits)", "entropy (bits)"]  # fmt: skip
    table = page.locator("#token-table tbody tr")
    for i in (1, 5, count - 1):
        bits = table.nth(i).locator("td").nth(5).text_content()
        assert f"{float(rows[i]['surprisal (bits)']):.2f}" == bits
    assert rows[0]["surprisal (bits)"] == ""  # nothing predicts the first token
    assert errors == []  # no script error on the way


def test_it_overlays_a_compare_with_its_difference(
    scripted_web, make_user, page, login, artifacts_dir
):
    errors = watch_errors(page)
    make_user("ivo")
    login(scripted_web, "ivo")
    page.goto(f"{scripted_web}/inspect/")
    page.get_by_role("tab", name="Compare").click()
    page.get_by_label("Text to compare").fill(" the owl sang to the moon")
    page.get_by_label("Prefix A").fill("Once upon a time,")
    page.get_by_label("Prefix B").fill("The dog ran.")
    page.locator("#form-compare").get_by_role("button", name="Compare").click()
    figure = page.locator("figure.weft-chart")
    expect(figure.locator("canvas").first).to_be_visible()
    entry = chart_entry(page, figure)
    assert [s["label"] for s in entry["series"]] == ["A", "B", "B − A"]
    a, b, diff = (s["values"] for s in entry["series"])
    assert diff == [pytest.approx(y - x, abs=1e-3) for x, y in zip(a, b, strict=True)]
    assert canvas_ink(page, figure) > 0.02
    chips = page.locator("#tokens .tok")
    assert chips.count() == len(a)
    chips.nth(1).hover()
    expect(figure.locator(".chart-readout")).to_contain_text("shared token 1")
    page.screenshot(path=artifacts_dir / "inspect-compare-chart.png", full_page=True)
    assert errors == []  # no script error on the way
