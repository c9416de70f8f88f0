"""A new user in real Chromium against the real ASGI server and the real model:
paste a paragraph, switch colour modes, hover a token, export CSV, score three choices."""

import csv
import io

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.slow]

WAIT = 90_000  # the real model on a shared 2-core machine: scoring can take seconds
PARAGRAPH = (
    "The river ran slowly past the old mill. In the evening, the miller sat by the door "
    "and watched the light fade over the water."
)


def test_it_scores_and_exports_in_the_browser(inspect_web, make_user, page, login, artifacts_dir):
    page.set_default_timeout(WAIT)
    make_user("ines")
    login(inspect_web, "ines")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Inspect").click()

    page.get_by_label("Text to score").fill(PARAGRAPH)
    page.locator("#form-score").get_by_role("button", name="Score").click()
    chips = page.locator("#tokens .tok")
    expect(chips.first).to_be_visible(timeout=WAIT)
    count = chips.count()
    assert count > 20
    expect(page.locator("#sum-tokens")).to_have_text(str(count))

    tokens = page.locator("#tokens")
    second = chips.nth(1)
    prob_colour = second.evaluate("el => getComputedStyle(el).backgroundColor")
    page.get_by_label("rank (top-10 / 100 / 1000 / rest)").check()
    expect(tokens).to_have_attribute("data-mode", "rank")
    page.get_by_label("relative to top-1").check()
    expect(tokens).to_have_attribute("data-mode", "rel")
    page.get_by_label("probability (log scale)").check()
    expect(tokens).to_have_attribute("data-mode", "prob")
    assert second.evaluate("el => getComputedStyle(el).backgroundColor") == prob_colour

    token = chips.nth(5)
    tip = page.locator(".tok-pop")  # the shared token popover (static/weft/tokens.js)
    expect(tip).to_have_count(0)
    token.hover()
    expect(tip).to_be_visible()
    expect(tip).to_contain_text("logprob")
    expect(tip).to_contain_text("rank")
    expect(tip.locator(".alt.sampled")).to_have_count(1)  # the actual token, highlighted
    page.screenshot(path=artifacts_dir / "inspect-tokens.png")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").click()
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    shown_ids = chips.evaluate_all("els => els.map(e => e.dataset.id)")
    assert [r["id"] for r in rows] == shown_ids
    assert rows[0]["logprob"] == ""  # the first position has none
    assert all(float(r["logprob"]) <= 0 for r in rows[1:])

    page.get_by_role("tab", name="Score choices").click()
    page.get_by_label("Shared prefix").fill("The capital of France is")
    page.get_by_label("Candidate continuations").fill(" Paris.\n a banana.\n purple seventeen.")
    page.locator("#form-choices").get_by_role("button", name="Score choices").click()
    table = page.locator("#choices-table tbody tr")
    expect(table).to_have_count(3, timeout=WAIT)
    expect(table.first).to_contain_text("Paris.")
    page.screenshot(path=artifacts_dir / "inspect-choices.png")
