"""Writing in the Loom's text in real Chromium (real ASGI server, Celery worker and
scripted engine): typing after the end and pressing Generate adds a human node and
generates from it; the new children are unread until visited and n goes to the
newest; typing inside a segment edits it; split at the caret (in the text and in the
edit dialog); hoist; undo and redo; every notice in the fixed notice area, never
moving the layout."""

import pytest
from playwright.sync_api import expect

from completions.models import Generation
from loom.models import Author, Node, Tree
from tests.loom.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
WAIT = 30_000


def reader_at(page, node_id):
    expect(page.locator("#loom-reader")).to_have_attribute(
        "data-node", str(node_id), timeout=10_000
    )


def caret_at(page, node_id, offset):
    """Put the caret `offset` characters into segment `node_id` of the text."""
    page.evaluate(
        """([id, offset]) => {
            const seg = document.querySelector(`#loom-doc .seg[data-id="${id}"]`);
            const walk = document.createTreeWalker(seg, NodeFilter.SHOW_TEXT);
            let left = offset;
            while (walk.nextNode()) {
                const n = walk.currentNode;
                if (left <= n.data.length) {
                    document.getElementById("loom-doc").focus();
                    getSelection().setBaseAndExtent(n, left, n, left);
                    return;
                }
                left -= n.data.length;
            }
        }""",
        [node_id, offset],
    )


def main_box(page):
    """Where the reading column sits (its height follows its content)."""
    box = page.locator(".loom-main").bounding_box()
    return box["x"], box["y"], box["width"]


# A refusal here is a 422 (the form's errors, swapped in), which Chromium logs.
@pytest.mark.allow_console_errors(r"status of 422 \(Unprocessable Entity\)")
def test_it_writes_generates_and_navigates_in_the_text(
    loom_stack, make_user, page, login, artifacts_dir
):
    user = make_user("writer")
    tree = Tree.objects.create_from_prompt(user, "The lighthouse keeper")
    root = tree.root
    page.set_viewport_size({"width": 1400, "height": 900})
    login(loom_stack["url"], "writer")
    page.goto(f"{loom_stack['url']}/loom/{tree.pk}/n/{root.pk}/")
    layout = main_box(page)

    # Enter puts the caret at the end of the text; what is typed there, then
    # Generate, becomes a human child that the generation continues.
    page.keyboard.press("Enter")
    page.keyboard.type(" counted <b>ships</b>")
    expect(page.locator("#write-bar")).to_be_visible()
    page.get_by_role("button", name="Generate (g)").click()
    expect(page.locator(".placeholders .child")).to_have_count(3, timeout=WAIT)
    written = Node.objects.get(parent=root, text=" counted <b>ships</b>")
    assert written.author == Author.HUMAN
    reader_at(page, written.pk)
    expect(page.locator("#current-seg")).to_have_text(" counted <b>ships</b>")
    expect(page.locator("#loom-children .child.model")).to_have_count(3, timeout=WAIT)
    kids = list(written.children())
    assert [k.author for k in kids] == ["model"] * 3
    sent = Generation.objects.get(target__parent=written.pk).params["prompt"]
    assert sent == "The lighthouse keeper counted <b>ships</b>"

    # New children are unread until visited; n goes to the newest one.
    expect(page.locator("#loom-children .child.unread")).to_have_count(3)
    page.screenshot(path=artifacts_dir / "loom-write-unread.png")
    page.keyboard.press("n")
    reader_at(page, kids[-1].pk)
    page.keyboard.press("ArrowLeft")
    reader_at(page, written.pk)
    expect(page.locator("#loom-children .child.unread")).to_have_count(2)
    expect(
        page.locator(f"#loom-children .child:not(.unread) a[data-id='{kids[-1].pk}']")
    ).to_have_count(1)

    # Typing inside a segment changes that node (in-place mode), Ctrl+S saves.
    caret_at(page, root.pk, len("The"))
    page.keyboard.type(" old")
    page.keyboard.press("Control+s")
    expect(page.locator("#write-bar")).to_be_hidden()
    reader_at(page, written.pk)
    assert Node.objects.get(pk=root.pk).text == "The old lighthouse keeper"

    # Split at the caret in the text: the root splits there, the reader stays put.
    caret_at(page, root.pk, len("The old"))
    page.get_by_role("button", name="Split at caret (s)").click()
    expect(page.locator(f"#loom-doc .seg[data-id='{root.pk}']")).to_have_text(
        "The old", timeout=10_000
    )
    reader_at(page, written.pk)
    tail = Node.objects.get(parent=root)
    assert (
        tail.text == " lighthouse keeper" and Node.objects.get(pk=written.pk).parent_id == tail.pk
    )

    # The notice of an undo sits in the fixed notice area: the layout does not move.
    page.keyboard.press("z")
    expect(page.locator("#loom-notices .toast")).to_contain_text("Undid: split a node.")
    assert main_box(page) == layout
    page.screenshot(path=artifacts_dir / "loom-undo-notice.png")
    assert Node.objects.get(pk=root.pk).text == "The old lighthouse keeper"
    page.keyboard.press("y")
    expect(page.locator("#loom-notices .toast").last).to_contain_text("Redid: split a node.")
    expect(page.locator(f"#loom-doc .seg[data-id='{root.pk}']")).to_have_text("The old")
    assert Node.objects.get(pk=root.pk).text == "The old"

    # A refused split says why in the notice area, again without moving the layout.
    page.goto(f"{loom_stack['url']}/loom/{tree.pk}/n/{written.pk}/")
    page.keyboard.press("e")
    area = page.get_by_label(f"Text of node {written.pk}")
    area.evaluate("el => el.setSelectionRange(0, 0)")
    page.get_by_role("button", name="Split at cursor").click()
    expect(page.locator("#loom-notices .toast.error")).to_contain_text("Split inside the text")
    assert main_box(page) == layout

    # The edit dialog's split uses the caret of its textarea.
    page.keyboard.press("e")
    area = page.get_by_label(f"Text of node {written.pk}")
    area.evaluate("el => el.setSelectionRange(8, 8)")
    page.get_by_role("button", name="Split at cursor").click()
    expect(page.locator("#current-seg")).to_have_text("<b>ships</b>", timeout=10_000)
    assert Node.objects.get(pk=written.pk).text == " counted"

    # Hoist: the text starts at the hoisted node; r goes to it; o again unhoists.
    page.keyboard.press("ArrowLeft")
    reader_at(page, written.pk)
    page.keyboard.press("o")
    expect(page.locator(".hoist-bar")).to_contain_text(f"starts at node #{written.pk}")
    expect(page.locator("#loom-doc")).to_have_text(" counted")
    page.keyboard.press("ArrowRight")
    reader_at(page, Node.objects.get(parent=written).pk)
    expect(page.locator("#loom-doc")).to_have_text(" counted <b>ships</b>")
    page.screenshot(path=artifacts_dir / "loom-hoisted.png")
    page.keyboard.press("r")
    reader_at(page, written.pk)
    page.keyboard.press("o")
    expect(page.locator(".hoist-bar")).to_have_count(0)
    expect(page.locator("#loom-doc")).to_contain_text("The old lighthouse keeper counted")
    assert Tree.objects.get(pk=tree.pk).hoisted_id is None


def test_it_makes_an_edited_sibling_when_the_tree_says_so(loom_stack, make_user, page, login):
    user = make_user("sibling-writer")
    tree = Tree.objects.create_from_prompt(user, "Root.")
    node = tree.root.add_child(" A quiet day.")
    login(loom_stack["url"], "sibling-writer")
    page.goto(f"{loom_stack['url']}/loom/{tree.pk}/n/{node.pk}/")
    page.get_by_label("makes an edited sibling").check()
    expect(page.locator("#loom-notices .toast")).to_contain_text("make an edited sibling")
    caret_at(page, node.pk, len(" A"))
    page.keyboard.type(" very")
    page.keyboard.press("Control+s")
    sibling = wait_for(
        lambda: Node.objects.filter(parent=tree.root, text=" A very quiet day.").first(),
        what="the edited sibling",
    )
    reader_at(page, sibling.pk)
    expect(page.locator("#current-seg")).to_have_text(" A very quiet day.")
    assert Node.objects.get(pk=node.pk).text == " A quiet day."
    expect(page.locator(".outline")).to_contain_text(" A quiet day.")  # its sibling
