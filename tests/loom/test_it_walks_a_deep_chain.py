import sys

import pytest

from loom.formats import exporters
from loom.models import Node
from loom.undo import undo_last
from tests.loom.conftest import build_chain

pytestmark = pytest.mark.django_db

DEPTH = 10_000


def test_it_reads_path_children_and_exports_a_10000_deep_chain(
    make_tree, django_assert_num_queries
):
    tree = make_tree(prompt="start")
    chain = build_chain(tree, DEPTH, text=" {i}")
    deepest = chain[-1]
    assert DEPTH > sys.getrecursionlimit()

    with django_assert_num_queries(1):
        path = Node.objects.path_to(deepest)
    assert len(path) == DEPTH + 1
    assert [s.text for s in path[:3]] == ["start", " 0", " 1"] and path[-1].id == deepest.pk

    middle = chain[DEPTH // 2]
    with django_assert_num_queries(1):
        assert [c.pk for c in middle.children()] == [chain[DEPTH // 2 + 1].pk]

    depths = [d for d, _ in Node.objects.preorder(tree)]
    assert depths == list(range(DEPTH + 1))
    exported = "".join(exporters.pyloom_json(tree))
    assert exported.count('"children":[') == DEPTH + 1

    # Deleting the chain below the root is one cascade, and undo puts it all back.
    assert chain[0].delete_subtree() == DEPTH
    assert Node.objects.filter(tree=tree).count() == 1
    undo_last(tree)
    assert len(Node.objects.path_to(deepest)) == DEPTH + 1


def test_it_opens_a_node_10000_deep_with_a_window_and_the_whole_path_on_request(client, make_tree):
    tree = make_tree(prompt="start")
    chain = build_chain(tree, DEPTH, text=" <w{i}>")
    client.force_login(tree.owner)
    page = client.get(f"/loom/{tree.pk}/n/{chain[-1].pk}/").text
    assert "show the earlier text" in page and "depth 1000+" in page
    assert "&lt;w9999&gt;" in page and "&lt;w9000&gt;" in page and "&lt;w8000&gt;" not in page
    assert f'data-root="{tree.root.pk}"' in page
    whole = client.get(f"/loom/{tree.pk}/n/{chain[-1].pk}/path/").text
    assert whole.count('class="seg') == DEPTH + 1 and "&lt;w0&gt;" in whole and "<w0>" not in whole
