"""Typed and left at once, the draft goes by beacon; a beacon can land after the page
has come Back, or never. The tab keeps what the beacon carried until a save is
answered, and the page that comes Back takes it and saves it: nothing typed is lost."""

import pytest

from tests.workbench.helpers import WORKBENCH_TIMEOUT


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_keeps_a_draft_whose_beacon_was_lost(wb_stack, make_user, login, page, artifacts_dir):
    from playwright.sync_api import expect

    from workbench.models import Draft

    user = make_user()
    url = wb_stack["url"]
    login(url, user.username)
    # Every beacon of this page is lost on the way (the browser says it was sent).
    page.add_init_script("navigator.sendBeacon = () => true;")
    page.goto(f"{url}/workbench/")
    page.locator("#id_prompt").fill("The first words")
    expect(page.locator("#draft-status")).to_have_text("Draft saved", timeout=WORKBENCH_TIMEOUT)

    page.locator("#id_prompt").fill("Typed, then straight to History")
    page.get_by_role("link", name="History").click()
    page.wait_for_url("**/history/")
    assert Draft.objects.get(owner=user).values["prompt"] == "The first words"  # not saved
    page.go_back()
    page.wait_for_url("**/workbench/")
    expect(page.locator("#id_prompt")).to_have_value("Typed, then straight to History")
    expect(page.locator("#draft-status")).to_have_text("Draft saved", timeout=WORKBENCH_TIMEOUT)
    page.screenshot(path=str(artifacts_dir / "workbench-draft-beacon-lost.png"))
    assert Draft.objects.get(owner=user).values["prompt"] == "Typed, then straight to History"
