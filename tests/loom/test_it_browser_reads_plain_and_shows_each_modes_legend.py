"""In Chromium: the plain view turns the probability colours off on every token page, at
once and for the user's next visits (Inspect, then the Loom); Inspect shows the legend of
the colour mode chosen, and an invalid k beside its field while the last result stays;
a tree of human text only shows no probability scale."""

import pytest
from playwright.sync_api import expect

from core.models import Preferences
from loom.models import Author

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

TRANSPARENT = "rgba(0, 0, 0, 0)"


def background(locator) -> str:
    return locator.evaluate("el => getComputedStyle(el).backgroundColor")


def test_it_reads_plain_and_shows_the_legend_of_each_mode(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    user = make_user("plainreader")
    base = loom_stack["url"]
    login(base, "plainreader")
    page.goto(f"{base}/inspect/")
    page.get_by_label("Text to score").fill("Once upon a time there was a quiet harbour.")
    page.locator("#form-score").get_by_role("button", name="Score").click()
    chips = page.locator("#tokens .tok")
    expect(chips.first).to_be_visible(timeout=30_000)

    prob, rank, rel = (page.locator(f'[data-legend-mode="{m}"]') for m in ("prob", "rank", "rel"))
    expect(prob).to_be_visible()
    expect(rank).to_be_hidden()
    page.get_by_label("rank (top-10 / 100 / 1000 / rest)").check()
    expect(rank).to_be_visible()
    expect(rank).to_contain_text("top-1000")
    expect(prob).to_be_hidden()
    page.get_by_label("relative to top-1").check()
    expect(rel).to_be_visible()
    expect(rank).to_be_hidden()
    page.screenshot(path=artifacts_dir / "inspect-rel-legend.png")
    page.get_by_label("probability (log scale)").check()

    # An invalid k: the message beside the field, the last result still there.
    shown = chips.count()
    page.get_by_label("Alternatives per position (k)").fill("abc")
    page.locator("#form-score").get_by_role("button", name="Score").click()
    expect(page.locator("#score-err-k")).to_contain_text("integer")
    expect(page.locator("#tokens .tok")).to_have_count(shown)
    page.screenshot(path=artifacts_dir / "inspect-k-error.png")

    # Plain view: off at once, and remembered for the user.
    coloured = chips.nth(3)
    assert background(coloured) != TRANSPARENT
    page.get_by_label("Plain text (no probability colours)").check()
    assert background(coloured) == TRANSPARENT
    expect(page.locator(".tok-scale").first).to_be_hidden()
    for _ in range(50):  # the preference is saved by a request of its own
        if Preferences.objects.plain_view(user):
            break
        page.wait_for_timeout(100)
    assert Preferences.objects.plain_view(user)

    tree = make_tree(user, prompt="The harbour")
    node = tree.root.add_child(
        " was quiet",
        author=Author.MODEL,
        params={"model": "scripted"},
        logprobs={"tokens": [" was", " quiet"], "token_logprobs": [-0.1, -6.0],
                  "top_logprobs": [{" was": -0.1, " is": -2.0}, {" quiet": -6.0, " busy": -1.0}]},
    )  # fmt: skip
    page.goto(f"{base}/loom/{tree.pk}/n/{node.pk}/")
    assert "plain-view" in page.locator("body").get_attribute("class")
    rare = page.locator("#loom-doc .tok").nth(1)
    assert background(rare) == TRANSPARENT
    expect(page.get_by_label("Plain text (no probability colours)")).to_be_checked()
    page.screenshot(path=artifacts_dir / "loom-plain.png")
    page.get_by_label("Plain text (no probability colours)").uncheck()
    assert background(rare) != TRANSPARENT
    expect(page.locator(".tok-scale")).to_be_visible()

    # A tree of human text only: no probability scale to read.
    human = make_tree(user, prompt="Written by hand")
    human.root.add_child(" and by hand again")
    page.goto(f"{base}/loom/{human.pk}/")
    expect(page.locator("#loom-doc")).to_contain_text("Written by hand")
    expect(page.locator(".tok-scale")).to_have_count(0)
