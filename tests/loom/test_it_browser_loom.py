"""A new user's session in real Chromium against the real ASGI server, Celery
worker and scripted engine."""

import json

import pytest
from playwright.sync_api import expect

from loom.models import Node, Tree
from tests.loom.conftest import PYLOOM_DEMO, tree_shape

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def reader_at(page, node_id):
    expect(page.locator("#loom-reader")).to_have_attribute(
        "data-node", str(node_id), timeout=10_000
    )


def press(page, key, node_id):
    page.keyboard.press(key)
    reader_at(page, node_id)


# The refused generation below is a 422, which Chromium logs.
@pytest.mark.allow_console_errors(r"status of 422 \(Unprocessable Entity\)")
def test_it_grows_edits_and_exports_a_tree(
    loom_stack, make_user, page, login, tmp_path, artifacts_dir
):
    user = make_user("weaver")
    base = loom_stack["url"]
    login(base, "weaver")
    page.goto(f"{base}/loom/")
    page.get_by_label("Prompt").fill("The <em>old</em> house on the hill")
    page.get_by_role("button", name="Create tree").click()
    expect(page.locator("#current-seg")).to_have_text("The <em>old</em> house on the hill")
    tree = Tree.objects.get(owner=user)
    root = tree.root

    # g: three children stream into placeholders, then become nodes.
    page.keyboard.press("g")
    expect(page.locator(".placeholders .child")).to_have_count(3)
    expect(page.locator(".placeholders .streaming").first).not_to_be_empty(timeout=15_000)
    expect(page.locator("#loom-children .child.model")).to_have_count(3, timeout=30_000)
    kids = list(root.children())
    assert len(kids) == 3 and all(k.author == "model" for k in kids)
    page.screenshot(path=artifacts_dir / "loom-generated.png")

    # Keyboard navigation.
    press(page, "ArrowRight", kids[0].pk)
    press(page, "ArrowDown", kids[1].pk)
    press(page, "ArrowDown", kids[2].pk)
    press(page, "ArrowUp", kids[1].pk)
    press(page, "ArrowLeft", root.pk)
    press(page, "ArrowRight", kids[1].pk)  # the last visited child
    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keys")).to_be_visible()
    page.keyboard.press("Escape")

    # e: edit in place. Keys typed into the field do not navigate.
    page.keyboard.press("e")
    field = page.get_by_label(f"Text of node {kids[1].pk}")
    field.fill(" and the wind ArrowLeft g b")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#current-seg")).to_have_text(" and the wind ArrowLeft g b")
    reader_at(page, kids[1].pk)
    assert Node.objects.get(pk=kids[1].pk).text == " and the wind ArrowLeft g b"

    # b: bookmark.
    page.keyboard.press("b")
    expect(page.locator(".node-meta")).to_contain_text("bookmarked")
    assert Node.objects.get(pk=kids[1].pk).bookmarked

    # A grandchild, then Backspace deletes the subtree and z brings it back.
    page.keyboard.press("h")
    page.get_by_label(f"New child of node {kids[1].pk}").fill(" Grandchild.")
    page.get_by_role("button", name="Add child").click()
    grandchild = wait_node(kids[1], " Grandchild.")
    reader_at(page, grandchild.pk)
    press(page, "ArrowLeft", kids[1].pk)
    press(page, "Backspace", root.pk)
    expect(page.locator("#loom-children .child")).to_have_count(2)
    assert not Node.objects.filter(pk__in=[kids[1].pk, grandchild.pk]).exists()
    page.keyboard.press("z")
    reader_at(page, kids[1].pk)
    assert Node.objects.get(pk=grandchild.pk).parent_id == kids[1].pk
    expect(page.locator(".outline")).to_contain_text("Grandchild.")

    # A refused generation says why in the page and adds nothing.
    page.locator("#gen-settings summary").click()
    page.get_by_label("temperature").fill("200")
    page.get_by_role("button", name="Generate", exact=True).click()
    expect(page.locator("#loom-notices [role=alert]")).to_contain_text("Nothing was sent")
    # The message sits next to its field.
    expect(page.locator("#gen-err-temperature")).to_contain_text("less than or equal to 100")
    page.locator("#gen-settings").screenshot(path=tmp_path / "loom-settings-error.png")
    assert Node.objects.filter(parent_id=kids[1].pk).count() == 1

    # Export pyloom JSON, import it back, same tree.
    with page.expect_download() as download:
        page.get_by_role("link", name="pyloom JSON").click()
    exported = tmp_path / "tree.pyloom.json"
    download.value.save_as(exported)
    assert json.loads(exported.read_text())["root"]["text"] == "The <em>old</em> house on the hill"
    page.goto(f"{base}/loom/")
    page.get_by_label("Import a tree").set_input_files(exported)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator(".messages")).to_contain_text("Imported")
    copy = Tree.objects.filter(owner=user).exclude(pk=tree.pk).get()
    assert tree_shape(copy) == tree_shape(tree)


def wait_node(parent, text):
    from tests.loom.conftest import wait_for

    return wait_for(lambda: Node.objects.filter(parent=parent, text=text).first(), what="new node")


def test_it_imports_the_pyloom_demo_and_walks_to_its_deepest_node(
    loom_stack, make_user, page, login
):
    user = make_user("reader")
    base = loom_stack["url"]
    login(base, "reader")
    page.goto(f"{base}/loom/")
    page.get_by_label("Import a tree").set_input_files(PYLOOM_DEMO)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator(".messages")).to_contain_text("Imported")
    tree = Tree.objects.get(owner=user)
    assert tree.nodes.count() == 764

    rows = list(Node.objects.preorder(tree))
    depth, deepest = max(rows, key=lambda r: r[0])
    assert depth == 21
    path = [s.id for s in Node.objects.path_to(deepest["id"])]

    reader_at(page, tree.current_id)
    press(page, "r", path[0])
    for parent, child in zip(path, path[1:], strict=False):
        siblings = [c.pk for c in Node.objects.get(pk=parent).children()]
        press(page, "ArrowRight", siblings[0])  # nothing visited yet: the first child
        for sibling in siblings[1 : siblings.index(child) + 1]:
            press(page, "ArrowDown", sibling)
    reader_at(page, deepest["id"])
    expect(page.locator(".node-meta")).to_contain_text("depth 21")
    tail = deepest["text"].strip().splitlines()[-1][:40] if deepest["text"].strip() else ""
    if tail:
        expect(page.locator("#current-seg")).to_contain_text(tail)
