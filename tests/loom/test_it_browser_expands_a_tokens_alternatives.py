"""From the token popover in real Chromium, one action makes one single-token child
per alternative of a model-written token (logitloom's expand), by mouse or by keys."""

import math

import pytest
from playwright.sync_api import expect

from loom.models import Author, Node, Tree

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
WORDS = [" the", " old", " <house>"]


def test_it_expands_a_tokens_alternatives_from_the_popover(
    loom_stack, make_user, page, login, artifacts_dir
):
    user = make_user("expander")
    tree = Tree.objects.create_from_prompt(user, "Look at")
    lp = {
        "tokens": WORDS,
        "token_logprobs": [math.log(0.5)] * 3,
        "top_logprobs": [
            {w: math.log(0.5), " a": math.log(0.2), " <one>": math.log(0.1)} for w in WORDS
        ],
    }
    node = tree.root.add_child("".join(WORDS), author=Author.MODEL, logprobs=lp)
    login(loom_stack["url"], "expander")
    page.goto(f"{loom_stack['url']}/loom/{tree.pk}/n/{node.pk}/")

    # Mouse: hover the second token, then the popover's expand button.
    page.locator("#current-seg .tok").nth(1).hover()
    button = page.get_by_role("button", name="Expand all 2 alternatives as children")
    expect(button).to_be_visible()
    page.screenshot(path=artifacts_dir / "loom-expand-popover.png")
    button.click()
    expect(page.locator("#loom-children .child.model")).to_have_count(3, timeout=10_000)
    head = Node.objects.get(pk=node.pk)
    assert head.text == " the"
    assert [c.text for c in head.children()] == [" old <house>", " a", " <one>"]
    expect(page.locator("#loom-children")).to_contain_text("<one>")  # shown as text

    # Keys: Tab to the first token, Enter, up to the last item (the expand button), Enter.
    page.locator("#current-seg .tok").first.focus()
    page.keyboard.press("Enter")
    expect(page.locator(".tok-pop")).to_be_visible()
    page.keyboard.press("ArrowUp")
    assert page.evaluate("() => document.activeElement.textContent").startswith("Expand all 2")
    page.keyboard.press("Enter")
    # Siblings of the node: the reader shows their parent, the root.
    expect(page.locator("#loom-reader")).to_have_attribute(
        "data-node", str(tree.root.pk), timeout=10_000
    )
    expect(page.locator("#loom-children .child")).to_have_count(3)
    assert [c.text for c in tree.root.children()] == [" the", " a", " <one>"]
