"""In Chromium: the owner opens Share on the tree page, is told plainly what an unknown
username is, shares with a user as viewer, turns the read-only link on and sees the
link and who can see what; the viewer's page then reads the tree with no controls."""

import pytest
from playwright.sync_api import expect

from loom.models import TreeShare

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


# A refusal here is a 422 (the form's errors, swapped in), which Chromium logs.
@pytest.mark.allow_console_errors(r"status of 422 \(Unprocessable Entity\)")
def test_it_shares_a_tree_from_its_page(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    owner = make_user("sharer")
    make_user("reader")
    tree = make_tree(owner, prompt="A tree to share", title="Shared tree")
    child = tree.root.add_child(" and its child")
    base = loom_stack["url"]
    login(base, "sharer")
    page.goto(f"{base}/loom/{tree.pk}/n/{child.pk}/")

    page.get_by_role("button", name="Share").click()
    dialog = page.get_by_role("dialog", name="Share this tree")
    expect(dialog).to_contain_text("Who can see what")
    dialog.get_by_label("Share with (username)").fill("nobody")
    dialog.get_by_role("button", name="Share", exact=True).click()
    expect(dialog.get_by_role("alert")).to_contain_text("There is no user called “nobody”")
    assert not TreeShare.objects.exists()

    dialog.get_by_label("Share with (username)").fill("reader")
    dialog.get_by_label("as").select_option("viewer")
    dialog.get_by_role("button", name="Share", exact=True).click()
    expect(dialog.get_by_role("status")).to_contain_text("reader can now read this tree.")
    expect(dialog.locator('tr[data-user="reader"]')).to_be_visible()
    dialog.get_by_role("button", name="Turn on a read-only link").click()
    expect(dialog.locator("#share-link-url")).to_contain_text(f"{base}/loom/link/")
    expect(dialog).to_contain_text(
        "Anyone signed in to this Weft who has the link can read this tree"
    )
    page.screenshot(path=artifacts_dir / "loom-share-dialog.png")
    assert list(TreeShare.objects.values_list("user__username", "role")) == [("reader", "viewer")]

    # The viewer: the text, the path and exports, no controls that change anything.
    page.context.clear_cookies()
    login(base, "reader")
    page.goto(f"{base}/loom/")
    expect(page.locator(".shared-list")).to_contain_text("sharer")
    page.locator(".shared-list").get_by_role("link", name="Shared tree").click()
    expect(page.locator("#tree-role")).to_contain_text("you can read it (viewer)")
    expect(page.locator("#loom-doc")).to_contain_text("A tree to share")
    expect(page.get_by_role("button", name="Generate (g)")).to_have_count(0)
    expect(page.get_by_role("button", name="Share")).to_have_count(0)
    page.screenshot(path=artifacts_dir / "loom-shared-as-viewer.png")
