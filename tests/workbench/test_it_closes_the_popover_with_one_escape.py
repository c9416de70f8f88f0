"""One Escape closes the token popover, however it was opened: hovered while focus
is in the prompt, clicked (pinned), or opened from the keyboard."""

import pytest

from tests.workbench.helpers import make_generation

LOGPROBS = {
    "tokens": [" the", " cat", " sat"],
    "token_logprobs": [-0.1, -1.2, -3.0],
    "top_logprobs": [
        {" the": -0.1, " a": -2.4},
        {" cat": -1.2, " dog": -1.5},
        {" sat": -3.0, " ran": -0.9},
    ],
    "text_offset": [0, 4, 8],
}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_closes_the_popover_with_one_escape(wb_stack, make_user, login, page):
    from playwright.sync_api import expect

    user = make_user()
    done = make_generation(user, texts=[" the cat sat"], logprobs=LOGPROBS)
    login(wb_stack["url"], user.username)
    page.goto(f"{wb_stack['url']}/workbench/?generation={done.pk}")
    chip = page.locator(".gen-result .tok[data-alts]").nth(1)
    pop = page.locator(".tok-pop")

    page.locator("#id_prompt").focus()
    chip.hover()
    expect(pop).to_be_visible()
    page.keyboard.press("Escape")
    expect(pop).to_have_count(0)

    chip.click()
    expect(pop).to_be_visible()
    page.mouse.move(0, 0)
    page.keyboard.press("Escape")
    expect(pop).to_have_count(0)

    chip.focus()
    page.keyboard.press("Enter")
    expect(pop.locator("button.alt").first).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Escape")
    expect(pop).to_have_count(0)
    expect(chip).to_be_focused()
