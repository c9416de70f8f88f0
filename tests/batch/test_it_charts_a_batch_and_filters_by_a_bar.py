"""In Chromium against the real stack: while a batch runs, its throughput chart
(prompts/s, tokens/s) grows over the socket; once done, histograms of completion
length and mean logprob, and a click on a bar (or Enter on it) filters the results
table to the prompts with a sample in that bin; "show all" brings every row back."""

import json
import re

import pytest
from playwright.sync_api import expect

from batch.models import Batch
from tests.charts import canvas_ink, chart_entry, watch_errors

TIMEOUT = 60_000
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _click_bar(page, figure, index: int) -> None:
    """Click the bar once the page is at rest: the batch's last messages re-read its
    results and redraw its charts, and a click measured on a plot being replaced can
    land on the old one."""
    page.wait_for_load_state("networkidle")
    over = figure.locator(".u-over")
    over.scroll_into_view_if_needed()
    x = page.evaluate(
        "([id, i]) => weft.charts.entry(id).u.valToPos(i, 'x')", [figure.get_attribute("id"), index]
    )
    over.click(position={"x": x, "y": over.bounding_box()["height"] - 3})


def _shown_items(page) -> list[int]:
    ids = page.locator("#batch-results tbody tr[id]").evaluate_all("rs => rs.map(r => r.id)")
    return sorted(int(re.search(r"\d+$", i).group()) for i in ids)


def test_it_charts_a_batch_and_filters_by_a_bar(
    batch_stack, engine, make_user, login, page, artifacts_dir, tmp_path
):
    errors = watch_errors(page)
    page.set_viewport_size({"width": 1400, "height": 1400})
    user = make_user()
    login(batch_stack["url"], user.username)
    engine.fault(*[{"token_delay": 0.03}] * 24)  # slow enough to chart while it runs
    upload = tmp_path / "prompts.jsonl"
    upload.write_text("\n".join(json.dumps({"prompt": f"The owl {i}"}) for i in range(24)) + "\n")
    page.goto(f"{batch_stack['url']}/batch/")
    page.locator("#id_file").set_input_files(str(upload))
    page.locator("#id_n").fill("2")
    page.locator("#id_max_tokens").fill("10")
    page.locator("#id_temperature").fill("1.5")
    page.get_by_label("stop string 1").fill(",")
    page.get_by_label("stop string 2").fill(".")
    page.locator("#batch-start").click()
    page.wait_for_url("**/batch/*/")
    batch = Batch.objects.get(owner=user)

    rates = page.locator(f"#chart-batch-{batch.pk}-rates")
    expect(rates.locator("canvas").first).to_be_visible(timeout=TIMEOUT)
    assert page.locator("#batch-state").text_content() == "running"
    entry = chart_entry(page, rates)
    assert [s["label"] for s in entry["series"]] == ["prompts", "completion tokens"]
    assert canvas_ink(page, rates) > 0.01
    page.screenshot(path=str(artifacts_dir / "batch-charts-running.png"))

    expect(page.locator("#batch-state")).to_have_text("done", timeout=TIMEOUT)
    length = page.locator(f"#chart-batch-{batch.pk}-length")
    mean = page.locator(f"#chart-batch-{batch.pk}-mean_logprob")
    expect(length.locator("canvas").first).to_be_visible()
    expect(mean.locator("canvas").first).to_be_visible()
    samples = [s for item in batch.items.all() for s in item.samples]
    assert len(samples) == 48
    hist = chart_entry(page, length)
    counts = hist["series"][0]["values"]
    assert sum(counts) == 48
    assert sum(chart_entry(page, mean)["series"][0]["values"]) == 48
    final = chart_entry(page, rates)  # the whole run, once done
    assert max(final["series"][0]["values"]) > 0 and max(final["series"][1]["values"]) > 0
    assert canvas_ink(page, length) > 0.01
    page.screenshot(path=str(artifacts_dir / "batch-charts-done.png"))

    # A click on the tallest bar: the table lists exactly the prompts with a sample there.
    tallest = counts.index(max(counts))
    lo, hi = (int(v) for v in hist["filter"]["values"][tallest].split(":"))
    _click_bar(page, length, tallest)
    expect(page.locator("#batch-filter")).to_contain_text(
        f"completion length {hist['x_names'][tallest]}", timeout=TIMEOUT
    )
    expected = sorted(
        i.pk for i in batch.items.all() if any(lo <= s["tokens"] < hi for s in i.samples)
    )
    assert _shown_items(page) == expected[:25]
    fid = length.get_attribute("id")
    assert page.evaluate("id => weft.charts.entry(id).selected", fid) == tallest
    expect(length.locator(".chart-readout")).to_contain_text("Table filtered to")
    page.screenshot(path=str(artifacts_dir / "batch-histogram-filtered.png"))

    # The keyboard: the last bar of the mean-logprob histogram, by End and Enter.
    mean_entry = chart_entry(page, mean)
    mean.locator(".chart-plot").focus()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    expect(page.locator("#batch-filter")).to_contain_text("mean logprob", timeout=TIMEOUT)
    lo_m, hi_m = (float(v) for v in mean_entry["filter"]["values"][-1].split(":"))
    expected = sorted(
        i.pk for i in batch.items.all() if any(lo_m <= s["mean_logprob"] < hi_m for s in i.samples)
    )
    assert _shown_items(page) == expected[:25]
    # The other chart's bar is let go once the filtered table has been swapped in.
    page.wait_for_function("id => weft.charts.entry(id).selected == null", arg=fid)

    page.locator("#batch-filter").get_by_role("link", name="show all").click()
    expect(page.locator("#batch-filter")).to_have_count(0)
    assert len(_shown_items(page)) == 24
    assert page.evaluate("id => weft.charts.entry(id).selected", mean.get_attribute("id")) is None
    assert errors == []  # no script error on the way
