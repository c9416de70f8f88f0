"""Nothing typed is lost: the prompt and every setting (an invalid one too) survive a
reload, leaving the page for another and coming Back, and a second browser."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_keeps_the_draft_across_reload_and_browsers(
    wb_stack, make_user, login, page, browser, artifacts_dir
):
    from playwright.sync_api import expect

    user = make_user()
    url = wb_stack["url"]
    login(url, user.username)
    page.goto(f"{url}/workbench/")
    page.locator("#id_prompt").fill("A draft that\nmust not be lost")
    page.locator("#id_max_tokens").fill("abc")  # invalid, and kept as typed
    page.locator("#id_temperature").fill("0.42")
    page.locator("#id_echo").check()
    page.locator("input[name=stop_1]").fill("\\n\\n")
    expect(page.locator("#draft-status")).to_have_text("Draft saved", timeout=WORKBENCH_TIMEOUT)

    def assert_kept(p):
        expect(p.locator("#id_prompt")).to_have_value("A draft that\nmust not be lost")
        expect(p.locator("#id_max_tokens")).to_have_value("abc")
        expect(p.locator("#id_temperature")).to_have_value("0.42")
        expect(p.locator("#id_echo")).to_be_checked()
        expect(p.locator("input[name=stop_1]")).to_have_value("\\n\\n")

    page.reload()
    assert_kept(page)

    # Typed and left at once (before the debounce): the beacon on leaving saves it.
    page.locator("#id_prompt").fill("Changed, then straight to History")
    page.get_by_role("link", name="History").click()
    page.wait_for_url("**/history/")
    page.go_back()
    page.wait_for_url("**/workbench/")
    expect(page.locator("#id_prompt")).to_have_value("Changed, then straight to History")
    page.screenshot(path=str(artifacts_dir / "workbench-draft-after-back.png"))

    # Another browser (no shared storage), the same user: the same draft.
    other = browser.new_context()
    try:
        second = other.new_page()
        second.goto(f"{url}/login/")
        second.get_by_label("Username").fill(user.username)
        second.get_by_label("Password").fill("a-long-test-password")
        second.get_by_role("button", name="Log in").click()
        second.wait_for_url(lambda u: "/login/" not in u)
        second.goto(f"{url}/workbench/")
        expect(second.locator("#id_prompt")).to_have_value("Changed, then straight to History")
        expect(second.locator("#id_max_tokens")).to_have_value("abc")
    finally:
        other.close()
