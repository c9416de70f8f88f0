"""The whole Workbench path on the scripted engine, with screenshots."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT, drive_main_flow, fill_run_form


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_runs_samples_branches_saves_and_exports(
    wb_stack, engine, make_user, login, page, artifacts_dir
):
    from playwright.sync_api import expect

    # Tall enough that nothing scrolls: the screenshots show the page as laid out.
    page.set_viewport_size({"width": 1440, "height": 2400})
    user = make_user()
    login(wb_stack["url"], user.username)
    # Slow tokens down a little so the stream is visibly a stream.
    engine.fault({"token_delay": 0.02})
    result = drive_main_flow(
        page, wb_stack["url"], prompt="The quiet river", artifacts=artifacts_dir,
        shot="workbench-n3-logprobs.png",
    )  # fmt: skip
    assert len(result["lines"]) == 3

    # Screenshots a reviewer can look at: n = 1, and n = 8 with logprobs.
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="Once upon a time", n=1, max_tokens=40)
    page.locator("#run-btn").click()
    # The page keeps showing the earlier run (the draft's runs); the new one is on top.
    expect(page.locator(".run")).to_have_count(2, timeout=WORKBENCH_TIMEOUT)
    first = page.locator(".run").first
    expect(first.locator(".gen-result .sample")).to_have_count(1, timeout=WORKBENCH_TIMEOUT)
    page.screenshot(path=str(artifacts_dir / "workbench-n1.png"))
    fill_run_form(page, prompt="The owl said", n=8, logprobs=5, max_tokens=32)
    page.locator("#run-btn").click()
    newest = page.locator(".run").first
    expect(newest.locator(".gen-result .sample")).to_have_count(8, timeout=WORKBENCH_TIMEOUT)
    newest.locator(".sample").nth(1).locator(".tok[data-alts]").nth(3).hover()
    expect(page.locator(".tok-pop")).to_be_visible()
    page.screenshot(path=str(artifacts_dir / "workbench-n8-logprobs.png"))
