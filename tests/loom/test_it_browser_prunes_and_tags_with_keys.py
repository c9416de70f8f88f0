"""In Chromium: x archives (and hides) a node, z brings it back, "show
archived (N)" lists it; t focuses the tag field, and keys typed there do not
fire; the help overlay lists the new keys."""

import pytest
from playwright.sync_api import expect

from loom.models import Node, Tree
from tests.loom.test_it_browser_loom import press, reader_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_prunes_and_tags_with_the_keyboard(loom_stack, make_user, make_tree, page, login):
    user = make_user("pruner")
    tree = make_tree(user, prompt="Root")
    root = tree.root
    first = root.add_child(" first")
    second = root.add_child(" second")
    Tree.objects.filter(pk=tree.pk).update(current=first)
    base = loom_stack["url"]
    login(base, "pruner")
    page.goto(f"{base}/loom/{tree.pk}/n/{first.pk}/")
    reader_at(page, first.pk)

    page.keyboard.press("?")
    help_box = page.get_by_role("dialog", name="Keys")
    expect(help_box).to_contain_text("archive")
    expect(help_box).to_contain_text("add a tag")
    page.keyboard.press("Escape")

    # x: archive; the node stays open, marked, and leaves its parent's list.
    page.keyboard.press("x")
    expect(page.locator(".node-meta")).to_contain_text("archived")
    assert Node.objects.get(pk=first.pk).archived
    press(page, "ArrowLeft", root.pk)
    expect(page.locator("#loom-children .child")).to_have_count(1)
    press(page, "ArrowRight", second.pk)  # the archived child is skipped
    press(page, "ArrowLeft", root.pk)
    page.get_by_role("button", name="show archived (1)").click()
    expect(page.locator("#loom-children .child.archived")).to_have_count(1)
    page.get_by_role("button", name="hide archived (1)").click()
    expect(page.locator("#loom-children .child")).to_have_count(1)
    page.keyboard.press("z")
    reader_at(page, first.pk)
    assert not Node.objects.get(pk=first.pk).archived

    # t: the tag field; typing x, d, z there does nothing but type.
    page.keyboard.press("t")
    expect(page.locator("#tag-input")).to_be_focused()
    page.keyboard.type("xdz")
    page.keyboard.press("Enter")
    expect(page.locator("#node-tags .tag")).to_have_text(["xdz×"])
    node = Node.objects.get(pk=first.pk)
    assert node.tags == ["xdz"] and not node.archived
    page.get_by_role("button", name="Remove tag xdz").click()
    expect(page.locator("#node-tags .tag")).to_have_count(0)
    assert Node.objects.get(pk=first.pk).tags == []
