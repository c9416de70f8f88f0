"""In Chromium, the graph of the real 764-node pyloom demo and of a 35-node tree:
"Fit" shows every node as its own box of at least 8 × 8 px on one screen, no two
overlapping, the current path and the model colours drawn; a 35-node tree fits with
every box labelled; the graph opens centred on the current node, with a minimap while
zoomed in; ← → ↑ ↓ move as in the reader and Enter reads."""

import pytest
from playwright.sync_api import expect

from loom.formats.importers import import_file
from loom.models import Author, Tree
from tests.loom.conftest import PYLOOM_DEMO
from tests.loom.test_it_browser_loom import reader_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

OVERLAPS = """() => {
  const b = window.weft.graph.boxes().sort((p, q) => p.x - q.x);
  let bad = 0;
  for (let i = 0; i < b.length; i++) {
    for (let j = i + 1; j < b.length && b[j].x < b[i].x + b[i].w; j++) {
      if (b[j].y < b[i].y + b[i].h && b[i].y < b[j].y + b[j].h) bad++;
    }
  }
  return bad;
}"""


def open_graph(page, base, tree):
    page.goto(f"{base}/loom/{tree.pk}/graph/")
    canvas = page.locator("#loom-graph")
    expect(canvas).to_have_attribute("data-ready", "true", timeout=20_000)
    return canvas


def test_it_fits_the_pyloom_demo_in_one_screen(loom_stack, make_user, page, login, artifacts_dir):
    user = make_user("demo")
    [tree] = import_file(user, PYLOOM_DEMO.read_bytes(), filename="pyloom_demo.json")
    base = loom_stack["url"]
    page.set_viewport_size({"width": 1400, "height": 900})
    login(base, "demo")
    canvas = open_graph(page, base, tree)

    # Opens centred on the current node, readable, with the minimap showing where.
    current = Tree.objects.get(pk=tree.pk).current_id
    box = canvas.bounding_box()
    at = page.evaluate(f"window.weft.graph.screenOf({current})")
    assert abs(at["x"] - box["width"] / 2) < 4 and abs(at["y"] - box["height"] / 2) < 4
    assert int(canvas.get_attribute("data-labelled")) > 0
    mini = page.locator("#loom-minimap")
    expect(mini).to_be_visible()
    page.screenshot(path=artifacts_dir / "loom-graph-demo-open.png")
    # A click on the minimap moves the view there.
    was = page.evaluate("window.weft.graph.view()")
    mini.click(position={"x": 210, "y": 10})
    now = page.evaluate("window.weft.graph.view()")
    assert now["x"] > was["x"] and now["y"] < was["y"]
    page.get_by_role("button", name="Back to the current node").click()

    page.get_by_role("button", name="Fit the whole tree").click()
    expect(canvas).to_have_attribute("data-drawn", "764")
    boxes = page.evaluate("window.weft.graph.boxes()")
    assert len(boxes) == 764 and page.evaluate("window.weft.graph.folds()") == 0
    assert min(b["w"] for b in boxes) >= 8 and min(b["h"] for b in boxes) >= 8
    inside = [b for b in boxes if b["x"] >= 0 and b["y"] >= 0
              and b["x"] + b["w"] <= box["width"] and b["y"] + b["h"] <= box["height"]]  # fmt: skip
    assert len(inside) == 764  # one screen
    assert page.evaluate(OVERLAPS) == 0
    expect(page.locator("#loom-minimap")).to_be_hidden()
    page.screenshot(path=artifacts_dir / "loom-graph-demo-fit.png")


def test_it_fits_a_35_node_tree_with_every_label(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    user = make_user("small")
    tree = make_tree(user, prompt="The harbour at dawn")
    made = [tree.root]
    for i in range(34):
        parent = made[(i // 3)]
        made.append(
            parent.add_child(
                f" branch {i} where the boats rest",
                author=Author.MODEL if i % 2 else Author.HUMAN,
                params={"model": "scripted" if i % 4 == 1 else "other-model"} if i % 2 else None,
            )  # fmt: skip
        )
    made[20].toggle_bookmark()
    Tree.objects.filter(pk=tree.pk).update(current=made[14])
    base = loom_stack["url"]
    page.set_viewport_size({"width": 1400, "height": 900})
    login(base, "small")
    canvas = open_graph(page, base, tree)
    page.get_by_role("button", name="Fit the whole tree").click()
    expect(canvas).to_have_attribute("data-drawn", "35")
    expect(canvas).to_have_attribute("data-labelled", "35")  # every box shows its first words
    boxes = page.evaluate("window.weft.graph.boxes()")
    assert min(b["h"] for b in boxes) >= 14 and min(b["w"] for b in boxes) >= 80
    assert page.evaluate(OVERLAPS) == 0
    expect(page.locator("#graph-models")).to_contain_text("scripted")
    expect(page.locator("#graph-models")).to_contain_text("other-model")
    page.screenshot(path=artifacts_dir / "loom-graph-35-fit.png")

    # Keys as in the reader: ← parent, ↑ ↓ siblings, → child, Enter reads.
    canvas.focus()
    page.keyboard.press("ArrowLeft")  # made[14]'s parent is made[4], first of three
    expect(canvas).to_have_attribute("data-selected", str(made[4].pk))
    page.keyboard.press("ArrowDown")
    expect(canvas).to_have_attribute("data-selected", str(made[5].pk))
    page.keyboard.press("ArrowUp")
    expect(canvas).to_have_attribute("data-selected", str(made[4].pk))
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")  # made[5]'s first child
    expect(canvas).to_have_attribute("data-selected", str(made[16].pk))
    page.keyboard.press("Enter")
    reader_at(page, made[16].pk)


def test_it_folds_a_long_chain_and_opens_it(loom_stack, make_user, make_tree, page, login):
    from tests.loom.conftest import build_chain

    user = make_user("chains")
    tree = make_tree(user, prompt="Root")
    side = tree.root.add_child(" a side branch")
    chain = build_chain(tree, 30, text=" link {i}")
    chain[-1].add_child(" after the chain")
    Tree.objects.filter(pk=tree.pk).update(current=side)
    base = loom_stack["url"]
    page.set_viewport_size({"width": 1400, "height": 900})
    login(base, "chains")
    canvas = open_graph(page, base, tree)
    # The chain's inner nodes are one box; the rest of the tree has room to read.
    assert page.evaluate("window.weft.graph.folds()") == 1
    page.get_by_role("button", name="Fit the whole tree").click()
    assert int(canvas.get_attribute("data-drawn")) < 10
    # The fold opens on a click: every node is its own box again.
    page.get_by_role("button", name="Fit the whole tree").click()
    at = page.evaluate(f"window.weft.graph.boxOf({chain[1].pk})")
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + at["x"] + at["w"] / 2, box["y"] + at["y"] + at["h"] / 2)
    assert page.evaluate("window.weft.graph.folds()") == 0
    page.get_by_role("button", name="Fit the whole tree").click()
    expect(canvas).to_have_attribute("data-drawn", str(tree.nodes.count()))
