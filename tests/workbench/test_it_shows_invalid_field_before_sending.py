"""An invalid value is shown next to its field as you type, and Run sends nothing."""

import pytest

from tests.workbench.helpers import fill_run_form


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_shows_invalid_field_before_sending(wb_stack, engine, make_user, login, page):
    from playwright.sync_api import expect

    user = make_user()
    login(wb_stack["url"], user.username)
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="Keep this prompt", n=2, max_tokens=16)
    page.locator("#id_temperature").fill("200")
    error = page.locator("#err-temperature")
    expect(error).to_contain_text("less than or equal to 100")  # after the typing pause
    page.locator("#run-btn").click()
    expect(page.locator("#run-notice")).to_contain_text("Nothing was sent")
    expect(error).to_contain_text("less than or equal to 100")
    assert engine.completion_requests() == []
    assert page.locator("#id_prompt").input_value() == "Keep this prompt"

    # Fixing it clears the message.
    page.locator("#id_temperature").fill("0.8")
    expect(error).to_be_empty()
