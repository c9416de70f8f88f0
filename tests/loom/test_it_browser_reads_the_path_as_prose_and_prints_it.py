"""In Chromium: v opens read mode — the current path as prose, full width, no
controls — with model colours on request, copy and downloads; printed (page.pdf), the
PDF holds the text and none of the controls; w goes back to writing at the end."""

import io

import pytest
from playwright.sync_api import expect
from pypdf import PdfReader

from loom.models import Author, Tree
from tests.loom.test_it_browser_loom import reader_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_reads_the_path_as_prose_and_prints_it(
    loom_stack, make_user, make_tree, page, login, artifacts_dir
):
    user = make_user("prose")
    tree = make_tree(user, prompt="The lamp burned low in the <study>.")
    a = tree.root.add_child(
        "\n\nOutside, the snow kept falling.", author=Author.MODEL, params={"model": "scripted"}
    )
    b = a.add_child(" Nobody came to the door that night.")
    Tree.objects.filter(pk=tree.pk).update(current=b)
    base = loom_stack["url"]
    login(base, "prose")
    page.goto(f"{base}/loom/{tree.pk}/n/{b.pk}/")
    reader_at(page, b.pk)

    page.keyboard.press("v")
    page.wait_for_url(f"**/loom/{tree.pk}/n/{b.pk}/read/")
    prose = page.locator("#read-text")
    whole = "The lamp burned low in the <study>.\n\nOutside, the snow kept falling. Nobody came to the door that night."
    expect(prose).to_have_text(whole)
    assert page.locator("#read-text button, #read-text input").count() == 0
    # Model colours only when asked for.
    seg = page.locator("#read-text .seg.model")
    shadow = "el => getComputedStyle(el).boxShadow"
    assert seg.evaluate(shadow) == "none"
    page.get_by_label("Model colours").check()
    assert seg.evaluate(shadow) != "none"
    expect(page.locator(".read-models")).to_contain_text("scripted")
    page.get_by_label("Model colours").uncheck()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy the text").click()
    assert page.evaluate("navigator.clipboard.readText()") == whole
    with page.expect_download() as download:
        page.get_by_role("link", name="Download .txt").click()
    assert download.value.path().read_text() == whole
    page.screenshot(path=artifacts_dir / "loom-read.png")

    # Printed: the text, none of the controls.
    page.emulate_media(media="print")
    expect(page.locator(".read-bar")).to_be_hidden()
    expect(page.locator(".topbar")).to_be_hidden()
    pdf = page.pdf(format="A4")
    (artifacts_dir / "loom-read.pdf").write_bytes(pdf)
    text = " ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf)).pages)
    assert "The lamp burned low in the <study>." in text
    assert "Nobody came to the door that night." in text
    assert "Back to writing" not in text and "Download" not in text and "Log out" not in text
    page.emulate_media(media="screen")

    # w: back to writing, the caret at the end of the text.
    page.keyboard.press("w")
    reader_at(page, b.pk)
    expect(page.locator("#loom-doc")).to_be_focused()
    assert page.evaluate("location.hash") == ""
    assert page.evaluate(
        "getSelection().anchorNode && document.getElementById('loom-doc').contains(getSelection().anchorNode)"
    )
