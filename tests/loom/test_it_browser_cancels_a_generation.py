"""In Chromium: the Cancel button under streaming placeholders stops the run;
what streamed so far lands as children."""

import pytest
from playwright.sync_api import expect

from loom.models import Tree
from tests.loom.test_it_browser_loom import reader_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_cancels_a_streaming_generation_from_the_page(
    loom_stack, make_user, make_tree, page, login
):
    from completions.models import Generation

    user = make_user("canceller")
    tree = make_tree(user, prompt="A very long story:")
    base = loom_stack["url"]
    login(base, "canceller")
    page.goto(f"{base}/loom/{tree.pk}/")
    reader_at(page, tree.root.pk)
    page.locator("#gen-settings summary").click()
    page.get_by_label("n", exact=True).fill("2")
    page.get_by_label("max_tokens").fill("800")
    page.get_by_role("button", name="Generate", exact=True).click()
    for i in range(2):
        expect(page.locator(".placeholders .streaming").nth(i)).not_to_be_empty(timeout=15_000)
    page.get_by_role("button", name="Cancel", exact=True).click()
    # The finished generation re-reads the reader: the partial texts are children.
    expect(page.locator("#loom-children .child.model")).to_have_count(2, timeout=30_000)
    g = Generation.objects.get(owner=user)
    assert g.state == "cancelled" and g.charged_tokens < 2 * 800
    root = Tree.objects.get(pk=tree.pk).root
    assert sorted(k.text for k in root.children()) == sorted(c["text"] for c in g.choices)
