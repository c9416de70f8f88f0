"""The API keys page in Chromium: create a key, copy its ready snippet, use the
secret against /v1, revoke it (htmx, after a confirm)."""

import httpx
import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_creates_copies_and_revokes(proxy_web, make_user, page, login, artifacts_dir):
    make_user("grace")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=proxy_web)
    login(proxy_web, "grace")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys").click()
    expect(page.get_by_role("heading", name="API keys")).to_be_visible()
    expect(page.get_by_text("No keys yet.")).to_be_visible()

    page.get_by_label("New key name").fill("notebook")
    page.get_by_role("button", name="Create key").click()
    shown = page.get_by_role("status")
    expect(shown).to_contain_text("shown this once")
    secret = page.locator("#key-secret").text_content()
    env = page.locator("#key-env")
    expect(env).to_contain_text(f"export ACS_API_BASE={proxy_web}/v1")
    expect(env).to_contain_text(f"export ACS_API_KEY={secret}")
    expect(page.locator("#key-curl")).to_be_visible()
    expect(page.locator("#key-python")).to_contain_text("client.completions.create(")

    copy = page.locator('button[data-copy-target="key-env"]')
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == env.text_content()
    page.screenshot(path=artifacts_dir / "api-keys-created.png", full_page=True)

    auth = {"Authorization": f"Bearer {secret}"}
    assert httpx.get(f"{proxy_web}/v1/models", headers=auth, timeout=10).status_code == 200

    row = page.locator("table.keys tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("notebook")
    # A first revoke, declined in its confirmation, changes nothing.
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    row.get_by_role("button", name="Revoke notebook").click()
    page.wait_for_timeout(300)
    assert asked and "Revoke “notebook”?" in asked[0]
    expect(row).not_to_contain_text("revoked")
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    row.get_by_role("button", name="Revoke notebook").click()
    expect(row).to_contain_text("revoked")
    assert len(asked) == 2
    expect(row.get_by_role("button")).to_have_count(0)
    page.screenshot(path=artifacts_dir / "api-keys-revoked.png", full_page=True)

    page.reload()  # the secret is gone for good; the key is listed by prefix only
    expect(page.locator("#key-secret")).to_have_count(0)
    assert secret not in page.content()
    expect(page.locator("table.keys")).to_contain_text(secret.split(".")[0])
