"""Stop cancels a run; the text streamed so far is kept and can be saved."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form
from workbench.models import Run


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_cancels_and_keeps_partial_text(wb_stack, engine, make_user, login, page):
    from playwright.sync_api import expect

    user = make_user()
    login(wb_stack["url"], user.username)
    page.goto(f"{wb_stack['url']}/workbench/")
    engine.fault({"token_delay": 0.15})
    fill_run_form(page, prompt="A slow story", n=2, max_tokens=400)
    page.locator("#run-btn").click()
    run = page.locator(".run").first
    expect(run.locator(".gen-state.state-running")).to_be_visible(timeout=WORKBENCH_TIMEOUT)
    expect(run.locator("pre[id$='-choice-0']")).not_to_be_empty(timeout=WORKBENCH_TIMEOUT)
    run.get_by_role("button", name="Stop").click()
    expect(run.locator(".gen-result.state-cancelled")).to_be_visible(timeout=WORKBENCH_TIMEOUT)
    expect(run.locator(".notice.cancelled")).to_contain_text("kept below")
    expect(run.get_by_role("button", name="Stop")).to_have_count(0)
    texts = [run.locator(".sample").nth(i).get_attribute("data-text") for i in range(2)]
    assert texts[0]  # samples stream one after another: the second may be empty
    run.locator(".sample").nth(1).get_by_label("keep").uncheck()
    run.get_by_role("button", name="Save to History").click()
    expect(run.locator(".saved")).to_contain_text("Saved to History")
    saved = Run.objects.get(owner=user)
    assert saved.state == "cancelled"
    assert [s.text for s in saved.samples.all()] == texts[:1]
