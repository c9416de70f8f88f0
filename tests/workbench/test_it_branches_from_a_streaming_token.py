"""While a run streams, its coloured token chips can be clicked to branch (the same
popover and branch as a finished run's), and the colour legend is shown."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_branches_from_a_streaming_token(
    wb_stack, engine, make_user, login, page, artifacts_dir
):
    from playwright.sync_api import expect

    user = make_user()
    login(wb_stack["url"], user.username)
    engine.fault({"token_delay": 0.2})
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="The quiet river", n=1, logprobs=3, max_tokens=80)
    page.locator("#run-btn").click()
    run = page.locator(".run").first
    chips = run.locator("pre[id$='-choice-0'] .tok[data-in][data-alts]")
    expect(chips.nth(3)).to_be_attached(timeout=WORKBENCH_TIMEOUT)
    expect(run.locator(".gen-state.state-running")).to_be_visible()
    expect(run.locator(".tok-legend")).to_be_visible()

    target = chips.nth(2)
    before = "".join(chips.nth(i).text_content() for i in range(2))
    target.click()
    pop = page.locator(".tok-pop")
    expect(pop).to_be_visible()
    expect(pop.locator(".pop-foot")).to_contain_text("pick one to branch")
    page.screenshot(path=str(artifacts_dir / "workbench-branch-while-streaming.png"))
    alternative = pop.locator("button.alt:not(.sampled)").first
    chosen = alternative.get_attribute("data-alt")
    alternative.click()
    expect(page.locator("#id_prompt")).to_have_value("The quiet river" + before + chosen)
    assert run.locator(".gen-state.state-running").count() == 1  # branched mid-run
