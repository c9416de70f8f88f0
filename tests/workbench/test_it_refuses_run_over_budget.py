"""A run whose worst case does not fit the monthly budget is refused with the door's
message; nothing is sent and nothing is lost."""

import pytest

from completions.models import TokenBudget
from tests.workbench.helpers import fill_run_form


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_refuses_run_over_budget(wb_stack, engine, make_user, login, page):
    from playwright.sync_api import expect

    user = make_user()
    TokenBudget.objects.create(user=user, monthly_tokens=100)
    login(wb_stack["url"], user.username)
    page.goto(f"{wb_stack['url']}/workbench/")
    expect(page.locator("#budget")).to_contain_text("100 of 100 tokens left")
    fill_run_form(page, prompt="the cat", n=2, max_tokens=200)
    page.locator("#run-btn").click()
    notice = page.locator("#run-notice .refused")
    expect(notice).to_contain_text("Refused — nothing was sent")
    expect(notice).to_contain_text("only 100 are left")
    # the scripted tokenizer: BOS + 2 words = 3 prompt tokens; (100 - 3) // 2 = 48
    expect(notice).to_contain_text("largest max_tokens that fits is 48")
    assert engine.completion_requests() == []
    assert page.locator("#id_prompt").input_value() == "the cat"

    page.get_by_role("button", name="Use max_tokens = 48").click()
    assert page.locator("#id_max_tokens").input_value() == "48"
    page.locator("#id_prompt").press("Control+Enter")  # the keyboard way to Run
    expect(page.locator(".run .gen-state.state-done").first).to_be_visible(timeout=30_000)
    expect(page.locator(".run .gen-result .sample")).to_have_count(2)
    assert len(engine.completion_requests()) == 1
