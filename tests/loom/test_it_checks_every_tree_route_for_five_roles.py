"""Every tree route of loom/urls.py (iterated, so a new route is covered, or fails here
until it is classified) × the five roles: a stranger gets 404, a viewer and a link
holder read but their changes are 403 with the database unchanged, an editor changes
content but not who may see the tree, the owner does everything."""

import pytest
from django.urls import URLPattern, reverse

from completions.models import Generation
from loom import access
from loom.models import Expansion, LinkGrant, Node, Tree, TreeShare, UndoEntry
from loom.urls import urlpatterns

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}

# What each tree route is for. A route missing here fails the first test.
READ_GET = {
    "tree", "search", "export", "graph", "graph_data", "node", "path", "read",
    "expansion", "bookmark_step", "outline_children", "live",
}  # fmt: skip
READ_POST = {"code", "show_archived"}  # POSTs that change nothing stored (a view, a session flag)
EDIT_POST = {
    "rename", "duplicate", "undo", "redo", "write_mode", "context", "generate", "grow",
    "expansion_cancel", "write", "child_order", "action",
}  # fmt: skip
OWN_GET = {"share"}
OWN_POST = {"delete", "share_add", "share_revoke", "share_link"}
ACTIONS = [
    "edit", "child", "split", "merge", "move", "delete", "bookmark", "archive", "rate",
    "tag", "untag", "alternative", "expand", "hoist", "unhoist",
]  # fmt: skip
ROLES = ["owner", "editor", "viewer", "link", "stranger"]


def tree_routes() -> list[URLPattern]:
    return [p for p in urlpatterns if "<int:tree_id>" in str(p.pattern)]


def world(make_user, make_tree):
    """A tree with a child and an expansion, shared with an editor and a viewer, its
    link opened by a third user; a stranger besides."""
    users = {role: make_user() for role in ROLES}
    tree = make_tree(users["owner"], prompt="The shared prompt")
    child = tree.root.add_child(" a child", written_by=users["owner"])
    child.add_tag("t")
    child.toggle_bookmark()
    # Done already: a running one with nothing in flight is settled by whoever asks for
    # its progress (the door's catch-up, not the asker's change).
    x = Expansion.objects.create(
        tree=tree, root=child, depth=1, breadth=1, body={}, state=Expansion.State.DONE
    )
    access.share(tree, users["editor"], "editor")
    access.share(tree, users["viewer"], "viewer")
    access.set_link(tree, True)
    access.open_link(users["link"], Tree.objects.get(pk=tree.pk).link_token)
    return users, tree, child, x


def requests_for(pattern: URLPattern, tree, child, x, users) -> list[str]:
    kwargs = {"tree_id": tree.pk}
    route = str(pattern.pattern)
    values = {
        "node_id": child.pk, "fmt": "weft", "expansion_id": x.pk, "direction": "next",
        "user_id": users["viewer"].pk,
    }  # fmt: skip
    kwargs.update({k: v for k, v in values.items() if f":{k}>" in route})
    if ":action>" in route:
        return [reverse(f"loom:{pattern.name}", kwargs={**kwargs, "action": a}) for a in ACTIONS]
    return [reverse(f"loom:{pattern.name}", kwargs=kwargs)]


def form(tree, users) -> dict:
    return {
        "text": "changed", "offset": "1", "target": str(tree.root.pk), "title": "Renamed",
        "tag": "t", "value": "up", "mode": "sibling", "order": "rating", "memory": "m",
        "note": "", "note_depth": "3", "note_unit": "newlines", "depth": "1", "breadth": "1",
        "n": "1", "max_tokens": "1", "append": " more", "index": "0", "token": "x",
        "username": users["stranger"].username, "role": "viewer", "on": "0",
    }  # fmt: skip


def snapshot(tree) -> tuple:
    """Everything a request could change about the tree, its people and its runs."""
    return (
        list(Tree.objects.filter(pk=tree.pk).values()),
        Tree.objects.count(),
        list(Node.objects.filter(tree_id=tree.pk).order_by("id").values()),
        list(UndoEntry.objects.filter(tree_id=tree.pk).order_by("id").values_list("id", "stack")),
        list(TreeShare.objects.filter(tree_id=tree.pk).order_by("id").values()),
        list(LinkGrant.objects.filter(tree_id=tree.pk).order_by("id").values()),
        list(Expansion.objects.filter(tree_id=tree.pk).values()),
        Generation.objects.count(),
    )


def send(client, method: str, url: str, data: dict):
    if method == "GET":
        return client.get(url, **HX)
    return client.post(url, data, **HX)


def test_it_classifies_every_tree_route():
    names = {p.name for p in tree_routes()}
    known = READ_GET | READ_POST | EDIT_POST | OWN_GET | OWN_POST
    assert names == known, f"classify these routes: {names ^ known}"


@pytest.mark.parametrize("role", ROLES)
def test_it_answers_each_role_as_its_rights_say(role, client, make_user, make_tree):
    checked = 0
    for pattern in tree_routes():
        name = pattern.name
        method = "GET" if name in READ_GET | OWN_GET else "POST"
        count = len(ACTIONS) if ":action>" in str(pattern.pattern) else 1
        for i in range(count):
            # A fresh world per request: what the owner or an editor did before (a merge,
            # a delete) is not in the way.
            users, tree, child, x = world(make_user, make_tree)
            client.force_login(users[role])
            data = form(tree, users)
            url = requests_for(pattern, tree, child, x, users)[i]
            before = snapshot(tree)
            response = send(client, method, url, data)
            status = response.status_code
            where = f"{role} {method} {url} ({name})"
            if role == "stranger":
                assert status == 404, where
                assert snapshot(tree) == before, where
            elif name in READ_GET | READ_POST:
                assert status in (200, 302), f"{where}: {status}"
                if role in ("viewer", "link"):
                    assert snapshot(tree) == before, f"{where} changed something"
            elif role in ("viewer", "link") or (role == "editor" and name in OWN_GET | OWN_POST):
                assert status == 403, f"{where}: {status}"
                assert snapshot(tree) == before, f"{where} changed something"
                assert "Nothing was changed" in response.text, where
            else:
                # Allowed: done, or refused for what the input is (422), never a 403/404/500.
                assert status in (200, 204, 302, 422), f"{where}: {status} {response.text[:300]}"
            # The other method is never taken (a GET route that accepted a viewer's POST
            # would change nothing only by luck).
            other = "POST" if method == "GET" else "GET"
            assert send(client, other, url, data).status_code in (404, 405), where
            checked += 1
    assert checked >= len(tree_routes()) + len(ACTIONS) - 1


def test_it_lets_a_viewer_see_the_share_note_and_not_the_controls(client, make_user, make_tree):
    users, tree, child, _x = world(make_user, make_tree)
    client.force_login(users["viewer"])
    page = client.get(f"/loom/{tree.pk}/n/{child.pk}/").text
    assert f"Shared with you by {users['owner'].username}" in page and "you can read it" in page
    assert (
        "data-readonly" in page
        and 'data-act="generate"' not in page
        and "Delete subtree" not in page
    )
    assert "Share</button>" not in page
    client.force_login(users["editor"])
    page = client.get(f"/loom/{tree.pk}/n/{child.pk}/").text
    assert (
        'data-act="generate"' in page
        and "data-readonly" not in page
        and "Share</button>" not in page
    )
    client.force_login(users["owner"])
    assert "Share</button>" in client.get(f"/loom/{tree.pk}/n/{child.pk}/").text


def test_it_recovers_only_into_trees_the_user_may_change(client, make_user, make_tree):
    """Recover (not under a tree's route) lists and attaches into the trees one may change."""
    users, tree, child, _x = world(make_user, make_tree)
    for role in ROLES:
        g = Generation.objects.create(
            owner=users[role], kind="loom", params={"prompt": "p", "max_tokens": 1},
            target={"tree": tree.pk, "parent": 0}, state="done",
            choices=[{"index": 0, "text": f" from {role}", "finish_reason": "length"}],
        )  # fmt: skip
        client.force_login(users[role])
        listed = client.get("/loom/recover/").text
        assert (f'<option value="{tree.pk}">' in listed) == (role in ("owner", "editor")), role
        before = snapshot(tree)
        response = client.post(
            "/loom/recover/", {"generation": g.pk, "tree": tree.pk, "node": child.pk}
        )
        expected = {"owner": 302, "editor": 302, "viewer": 403, "link": 403, "stranger": 404}
        assert response.status_code == expected[role], role
        attached = Node.objects.filter(tree=tree, text=f" from {role}").exists()
        assert attached == (role in ("owner", "editor")), role
        if not attached:
            assert snapshot(tree) == before, role


def test_it_shows_a_generations_result_to_the_trees_members_only(client, make_user, make_tree):
    """The editor's generation ends: its result (what a page's final fragment loads) is
    shown to every member of the tree, and is a 404 to anyone else; Cancel stays the
    asker's."""
    users, tree, child, _x = world(make_user, make_tree)
    g = Generation.objects.create(
        owner=users["editor"], kind="loom", params={"prompt": "p", "max_tokens": 1},
        target={"tree": tree.pk, "parent": child.pk}, state="done",
        choices=[{"index": 0, "text": " the editor's", "finish_reason": "length"}],
    )  # fmt: skip
    for role in ROLES:
        client.force_login(users[role])
        response = client.get(f"/generations/{g.pk}/result/", **HX)
        if role == "stranger":
            assert response.status_code == 404
        else:
            assert response.status_code == 200, role
            assert f'hx-get="/loom/{tree.pk}/n/{child.pk}/"' in response.text, role
    assert Node.objects.get(tree=tree, text=" the editor's").written_by_id == users["editor"].pk
    client.force_login(users["viewer"])
    assert client.post(f"/generations/{g.pk}/cancel/").status_code == 404
