"""In Chromium: upload a 20-prompt JSONL on the Batch page, watch the live bar reach
100 %, page through the table, export JSONL and CSV and check every row."""

import csv
import io
import json

import pytest

from batch.models import Batch

TIMEOUT = 60_000


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_browser_runs_a_20_prompt_batch(
    batch_stack, engine, make_user, login, page, artifacts_dir, tmp_path
):
    from playwright.sync_api import expect

    page.set_viewport_size({"width": 1440, "height": 1600})
    user = make_user()
    login(batch_stack["url"], user.username)
    engine.fault(*[{"token_delay": 0.05}] * 40)  # slow enough to watch the bar move
    rows = [{"prompt": f"Tale {i}: the <b>owl</b>", "id": i, "split": "dev" if i % 2 else "test"}
            for i in range(20)]  # fmt: skip
    upload = tmp_path / "twenty.jsonl"
    upload.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    page.goto(f"{batch_stack['url']}/batch/")
    expect(page.get_by_role("link", name="Batch")).to_have_attribute("aria-current", "page")
    page.locator("#id_file").set_input_files(str(upload))
    page.locator("#id_title").fill("twenty owls")
    page.locator("#id_n").fill("2")
    page.locator("#id_max_tokens").fill("5")
    page.locator("#id_seed").fill("7")
    page.locator("#batch-start").click()
    page.wait_for_url("**/batch/*/")
    bar = page.locator(".batch-progress [role=progressbar]")
    # It moves while it runs (live over the socket), then reaches 100 %.
    expect(page.locator(".batch-progress .counts .done")).not_to_have_text(
        "0 done", timeout=TIMEOUT
    )
    page.screenshot(path=str(artifacts_dir / "batch-running.png"), full_page=True)
    expect(bar).to_have_attribute("aria-valuenow", "100.0", timeout=TIMEOUT)
    progress = page.locator(".batch-progress")
    expect(progress).to_contain_text("20 done")
    expect(progress).to_contain_text("0 failed")
    expect(progress).to_contain_text("0 remaining")
    expect(progress).to_contain_text("tokens/s")
    expect(page.locator("#batch-state")).to_have_text("done")
    # The table refreshes itself: every row of the first page is done, output as text.
    table = page.locator("#batch-results")
    expect(table.locator("tbody tr.item-done")).to_have_count(20, timeout=TIMEOUT)
    expect(table.locator("tbody tr").first).to_contain_text("Tale 0: the <b>owl</b>")
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    page.screenshot(path=str(artifacts_dir / "batch-done.png"), full_page=True)

    batch = Batch.objects.get(owner=user)
    items = {i.index: i for i in batch.items.all()}
    href = page.get_by_role("link", name="JSONL").get_attribute("href")
    lines = [
        json.loads(x) for x in page.request.get(f"{batch_stack['url']}{href}").text().splitlines()
    ]
    assert len(lines) == 40
    for line in lines:
        item = items[line["prompt_index"]]
        sample = item.samples[line["sample_index"]]
        assert line["prompt"] == rows[line["prompt_index"]]["prompt"]
        assert line["id"] == line["prompt_index"] and line["split"] == rows[line["id"]]["split"]
        assert line["status"] == "done" and line["finish_reason"] == "length"
        assert line["tokens"] == 5 and line["text"] == sample["text"] and line["text"]
        assert line["mean_logprob"] == pytest.approx(sample["mean_logprob"])
        assert line["mean_logprob"] < 0
    assert sorted((x["prompt_index"], x["sample_index"]) for x in lines) == [
        (p, s) for p in range(20) for s in range(2)
    ]
    href = page.get_by_role("link", name="CSV", exact=True).get_attribute("href")
    text = page.request.get(f"{batch_stack['url']}{href}").text()
    table_rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [(r["prompt_index"], r["sample_index"], r["text"], r["id"]) for r in table_rows] == [
        (str(x["prompt_index"]), str(x["sample_index"]), x["text"], str(x["id"])) for x in lines
    ]

    # The list shows the batch, its state and its progress.
    page.goto(f"{batch_stack['url']}/batch/")
    row = page.locator("table.batches tbody tr").first
    expect(row).to_contain_text("twenty owls")
    expect(row).to_contain_text("done")
    expect(row).to_contain_text("20 done · 0 failed · 0 remaining")
    page.screenshot(path=str(artifacts_dir / "batch-list.png"), full_page=True)
