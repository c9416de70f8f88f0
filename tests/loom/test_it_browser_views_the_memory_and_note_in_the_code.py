"""In Chromium: the memory and author's note typed on the tree page are kept (a reload
shows them), View code shows the prompt with both in place and its token count, and the
generation settings lay out whole (the model picker not cut, the stop strings in a row)."""

import pytest
from playwright.sync_api import expect

from loom.models import Tree

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_views_the_memory_and_note_in_the_code(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    user = make_user("memoirist")
    tree = make_tree(user, prompt="Line one\nLine two\nLine three")
    base = loom_stack["url"]
    page.set_viewport_size({"width": 1280, "height": 900})
    login(base, "memoirist")
    page.goto(f"{base}/loom/{tree.pk}/")
    page.get_by_text("Generation settings").click()

    # The settings lay out whole: a long model name fits its picker, stops share a row.
    picker = page.locator('#generate-form select[name="model"]')
    assert picker.evaluate("el => el.getBoundingClientRect().width") > 300
    stops = page.locator('#generate-form input[name^="stop_"]')
    tops = {round(stops.nth(i).bounding_box()["y"]) for i in range(4)}
    assert len(tops) == 1, tops  # one row
    legend = page.locator("#generate-form .stops legend")
    assert legend.bounding_box()["height"] < 30  # one line

    page.get_by_label("Memory").fill("Setting: a lighthouse, 1890.")
    page.get_by_label("Author's note").fill("[Mood: uneasy]")
    page.get_by_label("how far before the end").fill("1")
    page.get_by_label("how far before the end").press("Tab")  # a change saves it
    expect(page.locator("#loom-notices")).to_contain_text("Saved")
    page.get_by_role("button", name="View code").click()
    prompt = page.locator("#loom-prompt")
    expect(prompt).to_have_text(
        "Setting: a lighthouse, 1890.\nLine one\nLine two\n[Mood: uneasy]\nLine three"
    )
    expect(page.locator("#loom-prompt-tokens")).to_contain_text("prompt tokens")
    expect(page.locator("#loom-curl")).to_contain_text("[Mood: uneasy]")
    page.locator("#loom-code").scroll_into_view_if_needed()
    page.screenshot(path=artifacts_dir / "loom-memory-code.png", full_page=True)

    page.reload()
    page.get_by_text("Generation settings").click()
    expect(page.get_by_label("Memory")).to_have_value("Setting: a lighthouse, 1890.")
    expect(page.get_by_label("Author's note")).to_have_value("[Mood: uneasy]")
    expect(page.get_by_label("how far before the end")).to_have_value("1")
    saved = Tree.objects.get(pk=tree.pk)
    assert (saved.memory, saved.note, saved.note_depth) == (
        "Setting: a lighthouse, 1890.",
        "[Mood: uneasy]",
        1,
    )
