"""Backend errors: a 503 then success is retried and completes; a 429 whose
Retry-After is short is waited out; one longer than Weft will wait fails with the
code and request id, keeping the prompt; the next run works."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_survives_backend_errors(wb_stack, engine, make_user, login, page):
    from playwright.sync_api import expect

    user = make_user()
    login(wb_stack["url"], user.username)
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="The owl", n=2, max_tokens=12)

    def run_and_wait(state: str):
        page.locator("#run-btn").click()
        run = page.locator(".run").first
        expect(run.locator(f".gen-result.state-{state}")).to_be_visible(timeout=WORKBENCH_TIMEOUT)
        return run

    engine.fault({"status": 503, "retry_after": 1})
    run = run_and_wait("done")
    expect(run.locator(".sample-text").first).not_to_be_empty()
    assert len(engine.completion_requests()) == 2

    engine.fault({"status": 429, "retry_after": 1})
    run = run_and_wait("done")
    expect(run.locator(".sample")).to_have_count(2)

    engine.fault({"status": 429, "retry_after": 60})  # longer than Weft waits (3 s here)
    run = run_and_wait("failed")
    notice = run.locator(".notice.error")
    expect(notice).to_contain_text("rate_limited")
    expect(notice.locator(".request-id")).not_to_be_empty()
    expect(run.locator(".gen-state").first).to_contain_text("Failed")
    assert page.locator("#id_prompt").input_value() == "The owl"

    run = run_and_wait("done")
    # The earlier runs are still on the page.
    expect(page.locator(".run")).to_have_count(4)
