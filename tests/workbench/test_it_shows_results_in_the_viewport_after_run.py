"""At 1400×900, pressing Run shows the streaming samples on the first screen: the
first sample's box is inside the viewport without scrolling, beside the settings
column (which scrolls on its own)."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form

WIDTH, HEIGHT = 1400, 900


def box_in_viewport(locator) -> dict:
    box = locator.bounding_box()
    assert box is not None
    return box


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_shows_results_in_the_viewport_after_run(
    wb_stack, engine, make_user, login, page, artifacts_dir
):
    from playwright.sync_api import expect

    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    user = make_user()
    login(wb_stack["url"], user.username)
    engine.fault({"token_delay": 0.1})
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="The quiet river", n=3, logprobs=3, max_tokens=24)
    page.locator("#run-btn").click()
    first = page.locator(".run").first.locator(".sample").first
    expect(first.locator("pre[id$='-choice-0'] .tok").first).to_be_attached(
        timeout=WORKBENCH_TIMEOUT
    )
    assert page.evaluate("window.scrollY") == 0
    box = box_in_viewport(first)
    assert 0 <= box["y"] and box["y"] + box["height"] <= HEIGHT, box
    assert box["x"] + box["width"] <= WIDTH
    page.screenshot(path=str(artifacts_dir / "workbench-1400x900-streaming.png"))

    expect(page.locator(".run").first.locator(".gen-state.state-done")).to_be_visible(
        timeout=WORKBENCH_TIMEOUT
    )
    box = box_in_viewport(page.locator(".run").first.locator(".gen-result .sample").first)
    assert 0 <= box["y"] and box["y"] + box["height"] <= HEIGHT, box
    assert page.evaluate("window.scrollY") == 0
    # The settings column scrolls by itself: the page did not grow to hold it.
    side = page.locator("#wb-side")
    assert side.evaluate("el => el.scrollHeight > el.clientHeight")
    assert side.bounding_box()["y"] + side.bounding_box()["height"] <= HEIGHT
    page.screenshot(path=str(artifacts_dir / "workbench-1400x900-done.png"))

    # Collapsed, the samples get the whole width, and it stays collapsed on reload.
    page.get_by_role("button", name="Hide settings").click()
    expect(side).to_be_hidden()
    page.reload()
    expect(page.locator("#wb-side")).to_be_hidden()
    page.get_by_role("button", name="Show settings").click()
    expect(page.locator("#wb-side")).to_be_visible()
