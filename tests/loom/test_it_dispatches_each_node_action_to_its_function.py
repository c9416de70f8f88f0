"""The reader's node actions are one table (loom.node_views.ACTIONS): each of the 15
answers at its address — done, or refused with a message (422), never a 404 or a
500 — and an action the table does not hold is a 404 that changes nothing."""

import pytest

from loom.models import Node
from loom.node_views import ACTIONS

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
# The actions the reader's buttons and keys post to /loom/<tree>/n/<node>/<action>/.
ACTION_NAMES = {"edit", "child", "split", "merge", "move", "delete", "bookmark", "archive",
                "rate", "tag", "untag", "alternative", "expand", "hoist", "unhoist"}  # fmt: skip
# A form each action takes (the ones that need fields), so each also does its work.
FORMS = {
    "edit": {"text": "Root, edited"},
    "child": {"text": " a child"},
    "split": {"offset": "2"},
    "rate": {"value": "up"},
    "tag": {"tag": "x"},
    "untag": {"tag": "x"},
}


def test_it_holds_one_function_per_action():
    assert set(ACTIONS) == ACTION_NAMES


@pytest.mark.parametrize("action", sorted(ACTION_NAMES))
def test_it_answers_each_action(client, make_tree, action):
    tree = make_tree(prompt="Root")
    kid = tree.root.add_child(" kid")
    client.force_login(tree.owner)
    for form in (FORMS.get(action, {}), {}):  # with its fields, then with none
        node = Node.objects.filter(pk=kid.pk).first() or tree.root
        page = client.post(f"/loom/{tree.pk}/n/{node.pk}/{action}/", form, **HX)
        assert page.status_code in (200, 422), (action, form, page.status_code)


def test_it_refuses_an_action_it_does_not_hold(client, make_tree):
    tree = make_tree(prompt="Root")
    kid = tree.root.add_child(" kid")
    client.force_login(tree.owner)
    before = list(Node.objects.filter(tree=tree).order_by("id").values())
    page = client.post(f"/loom/{tree.pk}/n/{kid.pk}/frobnicate/", {"text": "x"}, **HX)
    assert page.status_code == 404
    assert list(Node.objects.filter(tree=tree).order_by("id").values()) == before
