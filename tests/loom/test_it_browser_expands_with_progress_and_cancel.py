"""In Chromium: Expand 2 × 3 from the tree page — the progress shows and the nodes
appear in the children list and the outline as they finish; Cancel stops what is still
running (what finished stays); undo takes the whole expansion back in one step."""

import httpx
import pytest
from playwright.sync_api import expect

from completions.models import Generation
from loom.models import Expansion, Tree
from tests.loom.conftest import wait_for
from tests.loom.test_it_browser_loom import reader_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_expands_with_progress_and_cancel(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    engine = loom_stack["engine"]
    user = make_user("grower")
    tree = make_tree(user, prompt="In the lighthouse logbook,")
    root = tree.root
    base = loom_stack["url"]
    login(base, "grower")
    page.goto(f"{base}/loom/{tree.pk}/n/{root.pk}/")
    reader_at(page, root.pk)
    # The first request answers at once; the three of the second level slowly (cancelled).
    httpx.delete(f"{engine}/_scripted/faults", timeout=5)
    slow = {"token_delay": 1.5}
    httpx.post(f"{engine}/_scripted/faults", json={"faults": [{}, slow, slow, slow]}, timeout=5)
    try:
        page.get_by_text("Generation settings").click()
        page.locator('#generate-form input[name="max_tokens"]').fill("6")
        page.get_by_label("levels deep").fill("2")
        page.get_by_label("children of each node").fill("3")
        page.get_by_role("button", name="Expand", exact=True).click()
        progress = page.locator(".expansion")
        expect(progress).to_contain_text("Expansion of node")
        # The first level's three nodes appear as they finish, and in the outline.
        expect(page.locator("#loom-children .child.model")).to_have_count(3, timeout=30_000)
        expect(progress).to_contain_text("of 4 requests done", timeout=15_000)
        expect(page.locator("#loom-outline [role='treeitem']")).to_have_count(4)
        page.screenshot(path=artifacts_dir / "loom-expansion-progress.png")
        assert {g.workload for g in Generation.objects.filter(owner=user)} == {"batch"}

        page.get_by_role("button", name="Cancel (what finished stays)").click()
        expect(progress).to_contain_text("Cancelled")
        expansion = Expansion.objects.get(tree=tree)
        wait_for(
            lambda: not Generation.objects.filter(owner=user, state__in=Generation.ACTIVE).exists(),
            timeout=30, what="the cancelled requests to end",
        )  # fmt: skip
        expansion.refresh_from_db()
        assert expansion.state == "cancelled"
        # What had finished stays (the first level); the cancelled ones added nothing.
        assert root.children().count() == 3
        assert tree.nodes.count() == 4
        page.screenshot(path=artifacts_dir / "loom-expansion-cancelled.png")
    finally:
        httpx.delete(f"{engine}/_scripted/faults", timeout=5)

    # One undo step takes the expansion back.
    page.keyboard.press("z")
    expect(page.locator("#loom-children .child")).to_have_count(0)
    assert Tree.objects.get(pk=tree.pk).nodes.count() == 1
