import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_logs_in_and_shows_the_layout(stack, make_user, page, login, artifacts_dir):
    make_user("ada")
    login(stack["url"], "ada")
    nav = page.get_by_role("navigation", name="Main")
    for name in ["Workbench", "Loom", "Inspect", "History", "Usage"]:
        expect(nav.get_by_role("link", name=name)).to_be_visible()
    expect(nav.get_by_role("link", name="Admin")).to_have_count(0)
    # The layout's live-updates socket connects through the real ASGI server.
    expect(page.locator("#live-dot")).to_have_class("dot on", timeout=10_000)
    page.screenshot(path=artifacts_dir / "layout.png")
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
