"""In Chromium: + and - rate the node being read (again clears it), the marks show in
the reader, the children list and the outline, and the children sort by rating with
thumbs-down hidden — remembered for the tree after a reload."""

import pytest
from playwright.sync_api import expect

from loom.models import Author, Node
from tests.loom.test_it_browser_loom import reader_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_rates_with_keys_and_sorts_children(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    user = make_user("rater")
    tree = make_tree(user, prompt="The letter said")
    root = tree.root
    a = root.add_child(" nothing at all.", author=Author.MODEL, params={"model": "scripted"})
    b = root.add_child(" come home.", author=Author.MODEL, params={"model": "scripted"})
    c = root.add_child(" burn this.", author=Author.MODEL, params={"model": "scripted"})
    base = loom_stack["url"]
    login(base, "rater")
    page.goto(f"{base}/loom/{tree.pk}/n/{a.pk}/")
    reader_at(page, a.pk)

    page.keyboard.press("-")
    expect(page.locator(".node-meta")).to_contain_text("rated down")
    page.keyboard.press("ArrowDown")
    reader_at(page, b.pk)
    page.keyboard.press("+")
    expect(page.locator(".node-meta")).to_contain_text("rated up")
    page.keyboard.press("+")  # again: cleared
    expect(page.locator(".node-meta")).not_to_contain_text("rated")
    page.keyboard.press("ArrowDown")
    reader_at(page, c.pk)
    page.keyboard.press("+")
    expect(page.locator(".node-meta")).to_contain_text("rated up")
    assert [Node.objects.get(pk=n.pk).rating for n in (a, b, c)] == [-1, None, 1]

    page.keyboard.press("ArrowLeft")
    reader_at(page, root.pk)
    children = page.locator("#loom-children .child")
    expect(children).to_have_count(3)
    expect(children.nth(0)).to_contain_text("nothing at all")
    expect(page.locator(f'#loom-outline [data-id="{c.pk}"] .rate-mark')).to_have_count(1)
    page.get_by_label("Order of the children").select_option("rating")
    expect(children.nth(0)).to_contain_text("burn this")
    expect(children.nth(2)).to_contain_text("nothing at all")
    page.get_by_label("hide thumbs-down ▼").check()
    expect(children).to_have_count(2)
    expect(page.locator(".child-order")).to_contain_text("(1 hidden)")
    page.screenshot(path=artifacts_dir / "loom-ratings.png")

    page.reload()
    expect(children).to_have_count(2)
    expect(children.nth(0)).to_contain_text("burn this")
    expect(page.get_by_label("Order of the children")).to_have_value("rating")
    # → goes to the first child as listed now.
    page.keyboard.press("ArrowRight")
    reader_at(page, c.pk)
