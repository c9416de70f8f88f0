"""Every page carries the Content-Security-Policy (Django's SECURE_CSP) and works
under it in Chromium: no script or style of ours is refused — the pages, a Loom tree
with its live socket, the Feedback dialog, the admin and the API reference — and the
one inline handler (the Loom's delete confirmation) still runs."""

import pytest
from playwright.sync_api import expect

from loom.models import Tree

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

PAGES = ["/workbench/", "/loom/", "/inspect/", "/batch/", "/history/", "/usage/", "/keys/",
         "/feedback/", "/budget/request/", "/swagger", "/admin/"]  # fmt: skip


def test_it_runs_every_page_under_the_policy(stack, make_user, page, login):
    base = stack["url"]
    user = make_user("csp", is_staff=True, is_superuser=True)
    tree = Tree.objects.create_from_prompt(user, "Once upon a time")
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text
            or "Refused to" in m.text else None)  # fmt: skip
    login(base, "csp")
    for path in [*PAGES, f"/loom/{tree.pk}/"]:
        response = page.goto(f"{base}{path}")
        assert response is not None and response.status == 200, path
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, path
        page.wait_for_load_state("networkidle")
        assert not refused, (path, refused)
    page.goto(f"{base}/loom/{tree.pk}/")
    expect(page.locator("#live-dot")).to_have_class("dot on", timeout=10_000)  # the socket
    page.goto(f"{base}/history/?q=owl")
    page.get_by_role("button", name="Feedback").click()
    expect(page.locator("#feedback-body textarea")).to_be_visible()
    assert (
        page.locator("#feedback-body input[name=page_url]")
        .input_value()
        .endswith("/history/?q=owl")
    )
    page.goto(f"{base}/loom/")
    asked: list[str] = []
    page.on("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.get_by_role("button", name="Delete").first.click()
    assert asked == ["Delete this tree and all its nodes?"]  # the hashed handler ran
    assert Tree.objects.filter(pk=tree.pk).exists()  # dismissed: kept
    assert not refused, refused
