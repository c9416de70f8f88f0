"""/swagger in Chromium: the vendored Swagger UI renders this server's own spec (no
login, nothing from a CDN)."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_renders_every_operation(proxy_web, page, artifacts_dir):
    outside = []
    page.on("request", lambda r: None if r.url.startswith(proxy_web) else outside.append(r.url))
    page.goto(f"{proxy_web}/swagger")
    expect(page.get_by_role("heading", name="Weft API")).to_be_visible(timeout=15_000)
    for path in ("/v1/completions", "/v1/models", "/v1/chat/completions", "/health"):
        expect(page.locator(".opblock-summary-path", has_text=path).first).to_be_visible()
    page.locator(".opblock-summary-path", has_text="/v1/completions").first.click()
    expect(page.get_by_text("budget_exceeded").first).to_be_visible()
    page.screenshot(path=artifacts_dir / "swagger.png")
    assert outside == [], outside
