"""In Chromium: g, then g g quickly while that generation runs. The second and third
presses are refused ("already generating") in the one notice area, and the running
generation stays on the page: its children appear when it ends, without a reload (the
refusal used to replace the live area, closing its socket)."""

import pytest
from playwright.sync_api import expect

from loom.models import Tree
from tests.loom.test_it_browser_loom import reader_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


# A refusal here is a 422 (the form's errors, swapped in), which Chromium logs.
@pytest.mark.allow_console_errors(r"status of 422 \(Unprocessable Entity\)")
def test_it_keeps_the_live_generation_when_g_is_refused(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    from completions.models import Generation

    user = make_user("presser")
    tree = make_tree(user, prompt="The keeper climbed the stairs")
    base = loom_stack["url"]
    login(base, "presser")
    page.goto(f"{base}/loom/{tree.pk}/")
    reader_at(page, tree.root.pk)
    # Long enough to press again while it runs (the scripted engine: 10 ms a token).
    page.locator("#gen-settings summary").click()
    page.get_by_label("n", exact=True).fill("2")
    page.get_by_label("max_tokens").fill("250")
    page.locator("#gen-settings summary").click()
    page.locator("#loom-reader").click(position={"x": 5, "y": 5})  # keys to the reader

    page.keyboard.press("g")
    live = page.locator("#loom-gen .gen-live")
    expect(live).to_have_count(1)
    expect(page.locator(".placeholders .streaming").first).not_to_be_empty(timeout=15_000)
    refused = lambda r: "/generate/" in r.url and r.status == 422  # noqa: E731
    with page.expect_response(refused), page.expect_response(refused):
        page.keyboard.press("g")
        page.keyboard.press("g")
    expect(live).to_have_count(1)  # the refusals left the live generation where it was
    expect(page.locator(".placeholders .streaming")).to_have_count(2)
    notices = page.locator("#loom-notices [role=alert]")
    expect(notices.first).to_contain_text("already generating")
    page.screenshot(path=artifacts_dir / "loom-g-refused.png")

    # It ends and its children appear on this page, no reload.
    expect(page.locator("#loom-children .child.model")).to_have_count(2, timeout=30_000)
    assert Generation.objects.filter(owner=user).count() == 1
    kids = list(Tree.objects.get(pk=tree.pk).root.children())
    assert len(kids) == 2 and all(k.author == "model" for k in kids)
