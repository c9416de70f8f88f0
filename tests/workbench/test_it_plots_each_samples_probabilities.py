"""A Workbench run with logprobs, in real Chromium against the real stack (worker,
socket, scripted engine): one small chart per sample of each sampled token's
probability, sharing one cursor, marked where a sample leaves the others; points and
chips light each other up; the compare page overlays two runs' samples, marked where
they part; a chart's CSV holds the chips' own probabilities."""

import csv
import io
import math
import re

import pytest
from playwright.sync_api import expect

from tests.charts import canvas_ink, chart_entry, watch_errors
from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _run(page, *, seed: str) -> object:
    before = page.locator(".run").count()
    page.locator("#id_seed").fill(seed)
    page.locator("#run-btn").click()
    expect(page.locator(".run")).to_have_count(before + 1)
    run = page.locator(".run").first  # the newest first
    expect(run.locator(".gen-state.state-done").first).to_be_visible(timeout=WORKBENCH_TIMEOUT)
    return run


def test_it_plots_each_samples_probabilities(
    wb_stack, engine, make_user, login, page, artifacts_dir
):
    errors = watch_errors(page)
    user = make_user()
    login(wb_stack["url"], user.username)
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="The owl", n=3, logprobs=2, max_tokens=12)
    page.locator("#id_temperature").fill("1.5")
    run = _run(page, seed="7")
    figures = run.locator("figure.weft-chart")
    expect(figures).to_have_count(3)
    entries = [chart_entry(page, figures.nth(i)) for i in range(3)]
    samples = run.locator(".gen-result .sample")
    for i, entry in enumerate(entries):
        assert canvas_ink(page, figures.nth(i)) > 0.01
        chips = samples.nth(i).locator(".tok[data-lp]")
        lps = [float(x) for x in chips.evaluate_all("els => els.map(e => e.dataset.lp)")]
        got = entry["series"][0]["values"]
        assert got == [pytest.approx(math.exp(lp), abs=1e-4) for lp in lps]
        split = samples.nth(i).locator(".tok.diverge")
        marks = [m["x"] for m in entry["marks"]]
        if split.count():
            assert marks == [int(split.first.get_attribute("data-i"))]
        else:
            assert marks == []
    assert any(e["marks"] for e in entries)  # three samples at temperature 1.5 part somewhere
    run.locator("figure.weft-chart").first.scroll_into_view_if_needed()
    page.screenshot(path=artifacts_dir / "workbench-probability-charts.png", full_page=True)

    # Chart → chip, and the other samples' charts follow the cursor.
    over = figures.nth(0).locator(".u-over")
    box = over.bounding_box()
    over.hover(position={"x": box["width"] * 0.4, "y": box["height"] / 2})
    hit = samples.nth(0).locator(".tok.chart-hit")
    expect(hit).to_have_count(1)
    at = int(hit.get_attribute("data-i"))
    ids = [figures.nth(i).get_attribute("id") for i in range(3)]
    cursor = "id => weft.charts.entry(id).u.cursor.idx"
    index = entries[0]["x"].index(at)
    assert [page.evaluate(cursor, fid) for fid in ids] == [index] * 3
    expect(figures.nth(0).locator(".chart-readout")).to_contain_text(f"token {at}")

    # Chip → chart.
    chip = samples.nth(2).locator(".tok[data-lp]").nth(4)
    chip.hover()
    assert page.evaluate(cursor, ids[2]) == entries[2]["x"].index(int(chip.get_attribute("data-i")))

    with page.expect_download() as download:
        figures.nth(1).get_by_role("button", name="CSV").click()
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    assert [float(r["probability of the sampled token"]) for r in rows] == [
        pytest.approx(v, abs=1e-5) for v in entries[1]["series"][0]["values"]
    ]

    # The compare page: run A beside a second run with another seed.
    first = re.search(r"\d+", run.get_attribute("id")).group()
    second = re.search(r"\d+", _run(page, seed="8").get_attribute("id")).group()
    page.goto(f"{wb_stack['url']}/workbench/compare/?a={first}&b={second}")
    pairs = page.locator(".compare-pair")
    expect(pairs).to_have_count(3)
    figure = pairs.nth(0).locator("figure.weft-chart")
    entry = chart_entry(page, figure)
    assert [s["label"] for s in entry["series"]] == [f"A · run {first}", f"B · run {second}"]
    assert canvas_ink(page, figure) > 0.01
    parted = pairs.nth(0).get_attribute("data-diverge-at")
    if parted is not None:
        assert entry["marks"], "a pair that parts is marked"
        mark = entry["marks"][0]["x"]
        side_a = pairs.nth(0).locator('[data-side="A"] .tok.diverge')
        assert mark == int(side_a.first.get_attribute("data-i"))
    pairs.nth(0).locator('[data-side="B"] .tok[data-lp]').nth(1).hover()
    assert page.evaluate(cursor, figure.get_attribute("id")) is not None
    figure.scroll_into_view_if_needed()
    page.screenshot(path=artifacts_dir / "workbench-compare-charts.png", full_page=True)
    assert errors == []  # no script error on the way
