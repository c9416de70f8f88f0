"""In Chromium: the outline beside the reader moves by keyboard (the tree
pattern: arrows, opening closed nodes on demand, Enter goes there) and by
click; the graph view draws the tree, zooms and pans, and a click or Enter on
a box opens that node in the reader."""

import pytest
from playwright.sync_api import expect

from loom.models import Author, Tree
from tests.loom.test_it_browser_loom import reader_at
from tests.loom.test_it_shows_the_whole_tree import build_ternary

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def make_story(make_tree, user):
    tree = make_tree(user, prompt="The lighthouse keeper")
    root = tree.root
    a = root.add_child(" rowed out", author=Author.MODEL)
    b = root.add_child(" stayed home")
    a1 = a.add_child(" into the fog")
    b1 = b.add_child(" and wrote letters")
    b1.add_child(" to the sea")
    b.toggle_bookmark()
    Tree.objects.filter(pk=tree.pk).update(current=a1)
    return tree, {"root": root, "a": a, "b": b, "a1": a1, "b1": b1}


def item(page, node_id):
    return page.locator(f'#loom-outline [role="treeitem"][data-id="{node_id}"]')


def test_it_walks_the_outline_by_keyboard_and_click(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    user = make_user("outliner")
    tree, n = make_story(make_tree, user)
    base = loom_stack["url"]
    login(base, "outliner")
    page.goto(f"{base}/loom/{tree.pk}/n/{n['a1'].pk}/")
    reader_at(page, n["a1"].pk)
    outline = page.get_by_role("tree")
    expect(outline.get_by_role("treeitem")).to_have_count(4)  # root, a, a1, b (closed)
    current = item(page, n["a1"].pk)
    expect(current).to_have_attribute("aria-current", "true")
    current.focus()

    # ↓ from a1 reaches b, which is closed; the reader's own arrow keys stay still.
    page.keyboard.press("ArrowDown")
    expect(item(page, n["b"].pk)).to_be_focused()
    expect(item(page, n["b"].pk)).to_have_attribute("aria-expanded", "false")
    page.keyboard.press("ArrowLeft")  # in the tree: to b's parent, the root
    expect(item(page, n["root"].pk)).to_be_focused()
    reader_at(page, n["a1"].pk)
    page.keyboard.press("End")
    expect(item(page, n["b"].pk)).to_be_focused()

    # → opens b (its children load now), → again steps into it, ↓ … Enter goes there.
    page.keyboard.press("ArrowRight")
    expect(item(page, n["b"].pk)).to_have_attribute("aria-expanded", "true")
    expect(item(page, n["b1"].pk)).to_be_visible()
    page.keyboard.press("ArrowRight")
    expect(item(page, n["b1"].pk)).to_be_focused()
    page.screenshot(path=artifacts_dir / "loom-outline-open.png")
    page.keyboard.press("Enter")
    reader_at(page, n["b1"].pk)
    # The new outline has b1 current, and the focus stays in the outline.
    expect(item(page, n["b1"].pk)).to_have_attribute("aria-current", "true")
    expect(item(page, n["b1"].pk)).to_be_focused()
    # The current node is open on its children: ← closes it, ← again goes to b.
    expect(item(page, n["b1"].pk)).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("ArrowLeft")
    expect(item(page, n["b1"].pk)).to_have_attribute("aria-expanded", "false")
    page.keyboard.press("ArrowLeft")
    expect(item(page, n["b"].pk)).to_be_focused()
    page.keyboard.press("ArrowLeft")  # b is open: ← closes it
    expect(item(page, n["b"].pk)).to_have_attribute("aria-expanded", "false")
    expect(item(page, n["b1"].pk)).to_be_hidden()

    # A click on an item's text goes there too.
    item(page, n["a"].pk).locator("a").first.click()
    reader_at(page, n["a"].pk)
    expect(page).to_have_url(f"{base}/loom/{tree.pk}/n/{n['a'].pk}/")
    page.screenshot(path=artifacts_dir / "loom-outline.png", full_page=True)

    # The trees page lists the tree's size, depth and the visit just made.
    page.goto(f"{base}/loom/")
    row = page.get_by_role("row").filter(has_text="The lighthouse keeper")
    expect(row.get_by_role("cell")).to_contain_text(["The lighthouse keeper", "6", "3", "ago"])
    page.screenshot(path=artifacts_dir / "loom-trees.png")


def box_point(page, node_id):
    canvas = page.locator("#loom-graph").bounding_box()
    at = page.evaluate(f"window.weft.graph.screenOf({node_id})")
    return canvas["x"] + at["x"], canvas["y"] + at["y"]


def test_it_goes_to_a_node_from_the_graph(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    user = make_user("grapher")
    tree, n = make_story(make_tree, user)
    base = loom_stack["url"]
    login(base, "grapher")
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{base}/loom/{tree.pk}/n/{n['a1'].pk}/")
    page.get_by_role("link", name="graph view").click()
    canvas = page.locator("#loom-graph")
    expect(canvas).to_have_attribute("data-ready", "true")
    expect(canvas).to_have_attribute("data-drawn", "6")
    expect(canvas).to_have_attribute("data-selected", str(n["a1"].pk))
    page.screenshot(path=artifacts_dir / "loom-graph.png")

    # Zoom in with +, pan by dragging: the view changes, the boxes move with it.
    canvas.focus()
    before = page.evaluate("window.weft.graph.view()")
    page.keyboard.press("+")
    assert page.evaluate("window.weft.graph.view()")["k"] > before["k"]
    x, y = box_point(page, n["root"].pk)
    page.mouse.move(x + 300, y + 200)
    page.mouse.down()
    page.mouse.move(x + 200, y + 150, steps=5)
    page.mouse.up()
    after = page.evaluate("window.weft.graph.view()")
    assert after["x"] != before["x"] and after["y"] != before["y"]
    reader_at_graph = page.url
    assert "/graph/" in reader_at_graph  # a drag is not a click

    # Keys as in the reader: ← to the parent, ↓ to its next sibling, Enter reads it.
    page.keyboard.press("ArrowLeft")
    expect(canvas).to_have_attribute("data-selected", str(n["a"].pk))
    page.keyboard.press("ArrowDown")
    expect(canvas).to_have_attribute("data-selected", str(n["b"].pk))
    expect(page.locator("#graph-status")).to_contain_text("bookmarked")
    page.keyboard.press("Enter")
    reader_at(page, n["b"].pk)

    # A click on a box opens that node.
    page.go_back()
    expect(canvas).to_have_attribute("data-ready", "true")
    page.mouse.click(*box_point(page, n["b1"].pk))
    reader_at(page, n["b1"].pk)
    assert Tree.objects.get(pk=tree.pk).current_id == n["b1"].pk


def test_it_draws_only_what_is_in_view_at_10000_nodes(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    user = make_user("bigtree")
    tree = make_tree(user, prompt="Root")
    ids = build_ternary(tree, 10_000)
    Tree.objects.filter(pk=tree.pk).update(current=ids[-1])
    base = loom_stack["url"]
    login(base, "bigtree")
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{base}/loom/{tree.pk}/graph/")
    canvas = page.locator("#loom-graph")
    expect(canvas).to_have_attribute("data-ready", "true", timeout=20_000)
    drawn = int(canvas.get_attribute("data-drawn"))
    assert 0 < drawn < 200, drawn
    page.screenshot(path=artifacts_dir / "loom-graph-10000.png")
    page.get_by_role("button", name="Fit the whole tree").click()
    # Too big to see at once: subtrees beyond the depth that fits fold into one box
    # each (the current path stays open), so the fit reads as an overview. The full
    # draw comes once the view rests (a moving view shows its pre-drawn picture).
    page.wait_for_function(
        "Number(document.querySelector('#loom-graph').dataset.drawn) > 50", timeout=10_000
    )
    drawn = int(canvas.get_attribute("data-drawn"))
    assert 50 < drawn < 2000, drawn
    assert page.evaluate("window.weft.graph.folds()") > 0
    assert min(b["h"] for b in page.evaluate("window.weft.graph.boxes()")) >= 8
    page.screenshot(path=artifacts_dir / "loom-graph-10000-fit.png")
    # Every fold opened, every node is a box (the bench's worst case).
    page.evaluate("window.weft.graph.openAll()")
    expect(canvas).to_have_attribute("data-drawn", "10000")
    page.screenshot(path=artifacts_dir / "loom-graph-10000-all.png")
    page.get_by_role("button", name="Back to the current node").click()
    page.mouse.click(*box_point(page, ids[-2]))
    reader_at(page, ids[-2])
