"""The whole-tree views in process: the outline beside the reader, its lazily
opened children, the graph page and its layout, the trees page's figures."""

import json
import time

import pytest
from django.db import connection

from loom import tree_views
from loom.models import Author, Node
from tests.loom.conftest import build_chain

pytestmark = pytest.mark.django_db


def build_ternary(tree, n: int) -> list[int]:
    """A tree of `n` nodes, three children each, breadth first (ids taken first
    so each bulk insert can name its parents)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT nextval(pg_get_serial_sequence('loom_node', 'id')) FROM generate_series(1, %s)",
            [n - 1],
        )
        ids = [tree.root.pk] + [row[0] for row in cur.fetchall()]
    rows = [
        Node(
            id=ids[i],
            tree=tree,
            parent_id=ids[(i - 1) // 3],
            position=(i - 1) % 3,
            text=f" node {i}" * 8,
        )
        for i in range(1, n)
    ]
    Node.objects.bulk_create(rows, batch_size=2000)
    return ids


@pytest.fixture
def small(make_tree):
    tree = make_tree(prompt="Root <script>alert(1)</script>")
    root = tree.root
    a = root.add_child(" a", author=Author.MODEL)
    b = root.add_child(" b")
    a1 = a.add_child(" a1")
    a.add_child(" a2").toggle_archive()
    b.add_child(" b1")
    b.toggle_bookmark()
    tree.current = a1
    tree.save()
    return tree, {"root": root, "a": a, "b": b, "a1": a1}


def test_it_opens_the_outline_along_the_current_path(client, small):
    tree, n = small
    client.force_login(tree.owner)
    page = client.get(f"/loom/{tree.pk}/n/{n['a1'].pk}/").text
    assert (
        'role="tree"' in page and page.count('role="treeitem"') == 4
    )  # root, a, a1, b (a2 archived)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    # The path is open, b is closed with children to load, the current node is the focus.
    assert f'data-id="{n["b"].pk}" aria-level="2"\n    aria-expanded="false"' in page
    assert 'aria-current="true" aria-selected="true" tabindex="0"' in page
    assert f'href="/loom/{tree.pk}/graph/"' in page


def test_it_loads_closed_children_on_request(client, small):
    tree, n = small
    client.force_login(tree.owner)
    part = client.get(f"/loom/{tree.pk}/n/{n['b'].pk}/outline/?level=2").text
    assert part.count('role="treeitem"') == 1 and " b1" in part and 'aria-level="3"' in part
    assert client.get(f"/loom/{tree.pk}/n/{n['b'].pk}/outline/?level=x²").status_code == 200


def test_it_answers_404_for_another_users_outline_and_graph(client, small, make_user):
    tree, n = small
    client.force_login(make_user("intruder"))
    for url in (
        f"/loom/{tree.pk}/n/{n['b'].pk}/outline/",
        f"/loom/{tree.pk}/graph/",
        f"/loom/{tree.pk}/graph/data/",
    ):
        assert client.get(url).status_code == 404


def test_it_serves_the_graph_its_nodes_in_order(client, small):
    tree, n = small
    n["b"].rate(1)
    Node.objects.filter(pk=n["a"].pk).update(params={"model": "m-one"})
    client.force_login(tree.owner)
    assert "loom-graph" in client.get(f"/loom/{tree.pk}/graph/").text
    g = client.get(f"/loom/{tree.pk}/graph/data/").json()
    at = {node_id: i for i, node_id in enumerate(g["ids"])}
    assert len(g["ids"]) == 6
    root, a, b = at[n["root"].pk], at[n["a"].pk], at[n["b"].pk]
    # Children after their parent, in their order (the page lays them out).
    assert g["parent"][a] == g["parent"][b] == root and a < b and g["parent"][root] == -1
    on_path = {g["ids"][i] for i, f in enumerate(g["flags"]) if f & tree_views.ON_PATH}
    assert on_path == {n["root"].pk, n["a"].pk, n["a1"].pk}
    assert g["flags"][b] & tree_views.BOOKMARK and g["flags"][a] & tree_views.MODEL
    assert g["flags"][a] & tree_views.UNREAD and g["flags"][b] & tree_views.RATED_UP
    assert g["ids"][g["current"]] == n["a1"].pk
    # Model colours: a's model has one, human nodes none, and the legend names it.
    assert g["colour"][a] >= 0 and g["colour"][b] == -1
    assert [label for label, _ in g["models"]] == ["m-one"]


def test_it_serves_a_10000_node_graph_small_and_fast(client, make_tree):
    tree = make_tree(prompt="Root")
    build_ternary(tree, 10_000)
    client.force_login(tree.owner)
    client.get(f"/loom/{tree.pk}/graph/data/")  # warm
    t0 = time.perf_counter()
    response = client.get(f"/loom/{tree.pk}/graph/data/")
    elapsed = time.perf_counter() - t0
    g = json.loads(response.content)
    assert len(g["ids"]) == 10_000 and max(g["parent"]) < 10_000
    # Labels are cut to GRAPH_LABEL characters: about 90 bytes a node, not the texts.
    assert len(response.content) < 10_000 * 120, len(response.content)
    assert elapsed < 2.0, elapsed  # sanity only; bench/loom_graph.py measures
    # The outline of a node of this tree lists at most OUTLINE_CHILDREN per level.
    page = client.get(f"/loom/{tree.pk}/n/{g['ids'][-1]}/").text
    assert page.count('role="treeitem"') <= 10 * 3 + 1


def test_it_keeps_a_deep_chain_outline_to_its_last_levels(client, make_tree):
    tree = make_tree(prompt="Root")
    chain = build_chain(tree, 2000)
    client.force_login(tree.owner)
    page = client.get(f"/loom/{tree.pk}/n/{chain[-1].pk}/").text
    assert page.count('role="treeitem"') == tree_views.OUTLINE_LEVELS + 1
    assert "more levels above" in page


def test_it_lists_node_count_depth_and_last_visit(client, small, make_tree, make_user):
    tree, n = small
    other = make_tree(owner=tree.owner, prompt="Other")
    build_chain(other, 12)
    make_tree(owner=make_user("someone"), prompt="Not listed")
    client.force_login(tree.owner)
    client.get(f"/loom/{tree.pk}/n/{n['a1'].pk}/")  # a visit
    page = client.get("/loom/").text
    assert f'<td class="num">6</td>\n          <td class="num"><span id="depth-{tree.pk}"' in page
    assert f'<td class="num">13</td>\n          <td class="num"><span id="depth-{other.pk}"' in page
    assert "<time datetime=" in page and "never" in page  # the chain's nodes were never opened
    # The depths come in a second request, swapped into their places.
    depths = client.get("/loom/depths/").text
    assert f'<span id="depth-{tree.pk}" hx-swap-oob="true">2</span>' in depths
    assert f'<span id="depth-{other.pk}" hx-swap-oob="true">12</span>' in depths
    assert depths.count("<span") == 2  # only the user's own trees


def test_it_keeps_the_path_open_through_a_node_past_the_listed_children(client, make_tree):
    tree = make_tree(prompt="Root")
    kids = [
        tree.root.add_child(f" child {i}", log=False)
        for i in range(tree_views.OUTLINE_CHILDREN + 10)
    ]
    last = kids[-1].add_child(" grandchild", log=False)
    client.force_login(tree.owner)
    page = client.get(f"/loom/{tree.pk}/n/{last.pk}/").text
    assert page.count('role="treeitem"') == 1 + tree_views.OUTLINE_CHILDREN + 1 + 1
    assert f'data-id="{kids[-1].pk}"' in page and "… and more" in page
    assert 'aria-current="true"' in page
    part = client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/outline/").text
    assert part.count('role="treeitem"') == tree_views.OUTLINE_CHILDREN and "… and more" in part


def test_it_does_not_take_a_one_line_pyloom_node_for_jsonl(make_user):
    from loom.formats.importers import import_file

    data = b'{"id": "r", "parent_id": null, "text": "root", "children": [{"id": "c", "text": " kid", "children": []}]}\n'
    [tree] = import_file(make_user(), data, filename="node.json")
    assert tree.nodes.count() == 2


def test_it_says_when_a_tree_is_too_big_for_the_graph(client, small, monkeypatch):
    tree, _n = small
    monkeypatch.setattr(tree_views, "GRAPH_MAX_NODES", 5)
    client.force_login(tree.owner)
    page = client.get(f"/loom/{tree.pk}/graph/").text
    assert "This tree has 6 nodes; the graph view draws up to 5." in page and "<canvas" not in page
    response = client.get(f"/loom/{tree.pk}/graph/data/")
    assert response.status_code == 422 and "outline" in response.json()["error"]
