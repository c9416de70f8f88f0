"""In Chromium: each arrow-key move adds one history entry, at once (Back takes one
press); the key list opens at its top and names every key; notices come one at a
time, in a strip of their own that covers no control, and can be dismissed."""

import pytest
from playwright.sync_api import expect

from loom.models import Tree
from tests.loom.test_it_browser_loom import reader_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

OVERLAPS = """(box) => {
  const n = document.querySelector("#loom-notices").getBoundingClientRect();
  return [...document.querySelectorAll("button, input, select, textarea, a, summary")]
    .filter((el) => !el.closest("#loom-notices") && el.offsetParent !== null)
    .map((el) => el.getBoundingClientRect())
    .filter((r) => r.width && r.left < n.right && r.right > n.left && r.top < n.bottom && r.bottom > n.top)
    .length;
}"""


# A refusal here is a 422 (the form's errors, swapped in), which Chromium logs.
@pytest.mark.allow_console_errors(r"status of 422 \(Unprocessable Entity\)")
def test_it_moves_with_one_history_entry_per_key(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    user = make_user("walker")
    tree = make_tree(user, prompt="The road")
    root = tree.root
    a = root.add_child(" went north")
    b = root.add_child(" went south")
    a.add_child(" into the hills")
    base = loom_stack["url"]
    login(base, "walker")
    page.goto(f"{base}/loom/{tree.pk}/n/{root.pk}/")
    reader_at(page, root.pk)
    start = page.evaluate("history.length")

    # The address changes in the same task as the key press, before any response.
    at_once = page.evaluate(
        """() => {
          document.body.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowRight", bubbles: true}));
          return location.pathname;
        }"""
    )
    assert at_once == f"/loom/{tree.pk}/n/{a.pk}/"
    reader_at(page, a.pk)
    assert page.evaluate("history.length") == start + 1
    page.keyboard.press("ArrowDown")
    reader_at(page, b.pk)
    page.wait_for_timeout(300)  # a late second entry would show up here
    assert page.evaluate("history.length") == start + 2
    assert page.url.endswith(f"/n/{b.pk}/")

    page.go_back()  # one press: back to a
    reader_at(page, a.pk)
    assert page.url.endswith(f"/n/{a.pk}/")
    page.go_back()
    reader_at(page, root.pk)

    # The key list opens at its top, its heading in view, and lists merging too.
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keys")
    expect(dialog).to_be_visible()
    heading = dialog.get_by_role("heading", name="Keys")
    expect(heading).to_be_in_viewport()
    assert page.evaluate("document.getElementById('key-help').scrollTop") == 0
    expect(dialog).to_contain_text("merge this node into its parent")
    expect(dialog).to_contain_text("On the graph page")
    page.screenshot(path=artifacts_dir / "loom-keys.png")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    # Notices: one at a time, over no control, dismissible.
    page.set_viewport_size({"width": 1280, "height": 800})
    page.keyboard.press("s")  # no caret in the text: refused with a notice
    notices = page.locator("#loom-notices .toast")
    expect(notices).to_have_count(1)
    expect(notices).to_contain_text("Put the caret")
    page.locator("#move-target").fill("999999")
    page.get_by_role("button", name="Move", exact=True).click()
    expect(notices).to_have_count(1)
    expect(notices).to_contain_text("no node with that number")
    page.screenshot(path=artifacts_dir / "loom-notice.png")
    assert page.evaluate(OVERLAPS) == 0
    page.locator("#move-target").scroll_into_view_if_needed()
    assert page.evaluate(OVERLAPS) == 0
    notices.get_by_role("button", name="Dismiss").click()
    expect(notices).to_have_count(0)

    # m merges the current node into its parent.
    page.keyboard.press("ArrowRight")
    reader_at(page, a.pk)
    page.keyboard.press("m")
    reader_at(page, root.pk)
    expect(page.locator("#current-seg")).to_have_text("The road went north")
    assert Tree.objects.get(pk=tree.pk).nodes.count() == 3
