"""With logprobs on, the Workbench colours tokens while they stream, with the same
chips (and popover) as the saved result, not only after the run ends."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_colours_tokens_while_streaming(wb_stack, engine, make_user, login, page, artifacts_dir):
    from playwright.sync_api import expect

    user = make_user()
    login(wb_stack["url"], user.username)
    engine.fault({"token_delay": 0.15})  # slow enough to look at mid-run
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="The quiet river", n=2, logprobs=3, max_tokens=60)
    page.locator("#run-btn").click()
    run = page.locator(".run").first
    live = run.locator("pre[id$='-choice-0']")
    coloured = live.locator(".tok[data-alts][class*=' p']")
    expect(coloured.nth(3)).to_be_attached(timeout=WORKBENCH_TIMEOUT)
    # Still running: these chips came over the socket, not from the saved result.
    expect(run.locator(".gen-state.state-running")).to_be_visible()
    assert run.locator(".gen-result .sample").count() == 0
    # The same popover as the saved result's.
    coloured.first.hover()
    expect(page.locator(".tok-pop")).to_be_visible()
    expect(page.locator(".tok-pop .alt.sampled")).to_have_count(1)
    page.screenshot(path=str(artifacts_dir / "workbench-streaming-tokens.png"))
    streamed = live.evaluate("el => el.textContent")
    page.mouse.move(0, 0)

    expect(run.locator(".gen-state.state-done")).to_be_visible(timeout=WORKBENCH_TIMEOUT)
    final = run.locator(".gen-result .sample").first.locator(".sample-text")
    assert final.evaluate("el => el.textContent").startswith(streamed)
    expect(final.locator(".tok[data-alts]").first).to_be_visible()
