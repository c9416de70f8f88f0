"""The token popover in the Loom, in real Chromium: a chip is reached with Tab,
Enter opens its alternatives on the first one, arrows move, one Escape closes it
and gives focus back to the chip; it is drawn over the scrolling reading panel,
not clipped by it, and picking an alternative makes the branch."""

import math

import pytest
from playwright.sync_api import expect

from loom.models import Author, Node, Tree

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

WORDS = [f" word{i}" for i in range(400)]


def long_tree(owner) -> tuple[Tree, Node]:
    """A model node long enough that the reading panel scrolls, with logprobs and two
    alternatives per token."""
    tree = Tree.objects.create_from_prompt(owner, "A long list:")
    lp = {
        "tokens": WORDS,
        "token_logprobs": [math.log(0.6)] * len(WORDS),
        "top_logprobs": [{w: math.log(0.6), " other": math.log(0.3), " third": math.log(0.05)} for w in WORDS],
        "text_offset": [0] * len(WORDS),
    }  # fmt: skip
    node = tree.root.add_child("".join(WORDS), author=Author.MODEL, logprobs=lp)
    return tree, node


def test_it_opens_alternatives_by_keyboard_over_the_scrolling_panel(
    loom_stack, make_user, page, login, artifacts_dir
):
    user = make_user("keys")
    tree, node = long_tree(user)
    # Tall enough for the popover to open below the panel's last line, past its edge.
    page.set_viewport_size({"width": 1280, "height": 900})
    login(loom_stack["url"], "keys")
    page.goto(f"{loom_stack['url']}/loom/{tree.pk}/n/{node.pk}/")
    panel = page.locator("#loom-path")
    assert panel.evaluate("el => el.scrollHeight > el.clientHeight")  # it does scroll

    # The last chip, scrolled into view at the bottom edge of the panel.
    chip = page.locator("#current-seg .tok").last
    chip.scroll_into_view_if_needed()
    chip.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # reached by the keyboard
    assert chip.evaluate("el => el === document.activeElement")
    panel.evaluate("el => { el.scrollTop = el.scrollHeight; }")  # the chip at the very bottom
    page.keyboard.press("Enter")
    pop = page.locator(".tok-pop")
    expect(pop).to_be_visible()
    expect(pop).to_contain_text('" word399"')
    expect(pop).to_contain_text("mass covered")
    expect(pop.locator(".alt.sampled")).to_have_count(1)
    assert pop.evaluate("el => el.matches(':popover-open')")  # in the top layer
    focused = page.evaluate("() => document.activeElement.dataset.alt")
    assert focused == " word399"  # the likeliest first: the sampled one
    page.keyboard.press("ArrowDown")
    assert page.evaluate("() => document.activeElement.dataset.alt") == " other"

    # Not clipped: wholly inside the viewport, and on top where it reaches past the panel.
    box = pop.bounding_box()
    view = page.viewport_size
    assert box["x"] >= 0 and box["y"] >= 0
    assert box["x"] + box["width"] <= view["width"] and box["y"] + box["height"] <= view["height"]
    panel_box = panel.bounding_box()
    outside = (
        box["y"] + box["height"] > panel_box["y"] + panel_box["height"] or box["y"] < panel_box["y"]
    )
    assert outside, (box, panel_box)  # the case a clipping panel would hide
    for y in (box["y"] + 4, box["y"] + box["height"] - 4):
        hit = page.evaluate(
            "([x, y]) => !!document.elementFromPoint(x, y).closest('.tok-pop')",
            [box["x"] + box["width"] / 2, y],
        )
        assert hit, f"something covers the popover at y={y}"
    page.screenshot(path=str(artifacts_dir / "loom-token-popover.png"))

    # One Escape closes it and gives the focus back to the chip.
    page.keyboard.press("Escape")
    expect(pop).to_have_count(0)
    assert chip.evaluate("el => el === document.activeElement")
    expect(page.locator("#loom-reader")).to_have_attribute("data-node", str(node.pk))

    # Enter, ArrowDown, Enter: branch with " other" in place of the last word.
    page.keyboard.press("Enter")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    sibling_text = "".join(WORDS[:-1]) + " other"
    expect(page.locator("#current-seg")).to_have_text(sibling_text, timeout=10_000)
    assert Node.objects.filter(tree=tree, parent=tree.root, text=sibling_text).exists()
