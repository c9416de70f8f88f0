"""In Chromium: the graph page of a shared tree hears the tree's changes too — a
member's new node appears in it without a reload, and the bar says who else is here."""

import pytest
from playwright.sync_api import expect

from loom.models import Node
from tests.loom.sharing import share

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_it_draws_a_members_new_node_without_a_reload(
    loom_stack, make_user, make_tree, page, login, client, artifacts_dir
):
    owner, editor = make_user("gail"), make_user("hal")
    tree = make_tree(owner, prompt="Graph root.")
    root = tree.root
    root.add_child(" one")
    share(tree, editor, "editor")
    base = loom_stack["url"]
    login(base, "gail")
    page.goto(f"{base}/loom/{tree.pk}/graph/")
    canvas = page.locator("#loom-graph")
    expect(canvas).to_have_attribute("data-ready", "true", timeout=20_000)
    page.wait_for_function("window.weft?.live?.socket?.readyState === 1")
    assert page.evaluate("window.weft.graph.boxes().length") == 2

    client.force_login(editor)
    response = client.post(
        f"/loom/{tree.pk}/n/{root.pk}/child/", {"text": " two"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    made = Node.objects.get(tree=tree, text=" two")
    expect(canvas).to_have_attribute("data-reloads", "1", timeout=5_000)
    assert page.evaluate("window.weft.graph.boxes().length") == 3
    assert page.evaluate(f"window.weft.graph.boxOf({made.pk}) !== null")
    page.screenshot(path=artifacts_dir / "loom-together-graph.png")
