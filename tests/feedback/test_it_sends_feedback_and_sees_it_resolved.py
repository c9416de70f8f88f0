"""A feedback round trip in real Chromium: the Feedback button of a page opens the form
filled in with that page's address, the time and the latest request id (editable); the
message is sent; staff mark it resolved with a reply in the admin; the user sees the
state and the reply on their feedback page."""

import pytest
from playwright.sync_api import expect

from completions.models import Generation
from feedback.models import Feedback

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _login(page, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("a-long-test-password")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/login/" not in url)


def test_it_sends_feedback_and_sees_it_resolved(
    stack, make_user, page, browser, login, artifacts_dir
):
    user = make_user()
    Generation.objects.create(owner=user, kind="workbench", params={"prompt": "private words"},
                              state="done", request_id="req-latest-run", choices=[])  # fmt: skip
    login(stack["url"], user.username)
    page.goto(f"{stack['url']}/history/?q=owl")
    page.get_by_role("button", name="Feedback").click()
    dialog = page.get_by_role("dialog", name="Feedback")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("page")).to_have_value(f"{stack['url']}/history/?q=owl")
    expect(dialog.get_by_label("request id")).to_have_value("req-latest-run")
    expect(dialog.get_by_label("time (UTC)")).not_to_have_value("")
    expect(dialog.get_by_label("What happened, or what would help?")).to_be_focused()
    page.keyboard.type("The search forgets my filter.")
    dialog.get_by_label("request id").fill("req-edited")
    page.screenshot(path=str(artifacts_dir / "feedback-dialog.png"))
    dialog.get_by_role("button", name="Send feedback").click()
    expect(dialog.get_by_role("status")).to_contain_text("Thank you")
    item = Feedback.objects.get(owner=user)
    assert (item.message, item.request_id) == ("The search forgets my filter.", "req-edited")
    assert item.page_url.endswith("/history/?q=owl") and "private words" not in str(vars(item))
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    # Staff, in a browser of their own: the admin's list, "resolved" ticked, a reply.
    staff = make_user(is_staff=True, is_superuser=True)
    admin = browser.new_context().new_page()
    _login(admin, stack["url"], staff.username)
    admin.goto(f"{stack['url']}/admin/feedback/feedback/")
    row = admin.locator("#result_list tbody tr", has_text="The search forgets")
    expect(row).to_contain_text("req-edited")
    admin.screenshot(path=str(artifacts_dir / "feedback-admin-list.png"))
    row.get_by_role("link", name=str(item.pk)).click()
    admin.get_by_label("Resolved").check()
    admin.get_by_label("Reply").fill("Fixed: the filter is kept now.")
    admin.get_by_role("button", name="Save", exact=True).click()
    expect(admin.locator(".messagelist")).to_contain_text("was changed successfully")
    admin.context.close()

    page.goto(f"{stack['url']}/feedback/")
    row = page.locator(f"#feedback-{item.pk}")
    expect(row).to_contain_text("resolved")
    expect(row).to_contain_text("Reply: Fixed: the filter is kept now.")
    row.get_by_role("link", name=str(item.pk)).click()
    expect(page.locator("#feedback-state")).to_have_text("resolved")
    page.screenshot(path=str(artifacts_dir / "feedback-resolved.png"))
