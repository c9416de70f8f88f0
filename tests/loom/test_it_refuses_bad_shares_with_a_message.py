"""The share dialog refuses what it cannot do with a message, and stores nothing: an
unknown username, the owner themself, a bad role, an empty or unstorable name, a bad
link switch. Only the owner opens it; a wrong link is a 404."""

import pytest

from loom.models import Tree, TreeShare

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_it_refuses_bad_shares_with_a_message(client, make_user, make_tree):
    owner, friend = make_user("ann"), make_user("bob")
    tree = make_tree(owner)
    client.force_login(owner)
    url = f"/loom/{tree.pk}/share/add/"
    cases = [
        ({"username": "nobody-here", "role": "editor"}, "There is no user called “nobody-here”"),
        ({"username": "ann", "role": "viewer"}, "You own this tree already"),
        ({"username": "bob", "role": "owner"}, "Choose a role: editor or viewer."),
        ({"username": "bob", "role": ""}, "role: This field is required."),
        ({"username": "", "role": "viewer"}, "Write the username of the person to share with."),
        ({"username": "b\x00ob", "role": "viewer"}, "Null characters are not allowed."),
        ({"username": "x" * 151, "role": "viewer"}, "at most 150 characters"),
        ({"username": "<b>bob</b>", "role": "viewer"}, "“&lt;b&gt;bob&lt;/b&gt;”"),
    ]
    for data, message in cases:
        response = client.post(url, data, **HX)
        assert response.status_code == 422, data
        assert "Not shared:" in response.text and message in response.text, (data, response.text)
        assert 'id="share-panel"' in response.text
    assert not TreeShare.objects.exists()

    # Without htmx: back to the share page, the reason as a message.
    response = client.post(url, {"username": "nobody-here", "role": "editor"}, follow=True)
    assert response.redirect_chain[-1][0] == f"/loom/{tree.pk}/share/"
    assert "There is no user called" in response.text and not TreeShare.objects.exists()

    bad_link = client.post(f"/loom/{tree.pk}/share/link/", {"on": "yes"}, **HX)
    assert bad_link.status_code == 422 and "Turn the link on or off." in bad_link.text
    assert Tree.objects.get(pk=tree.pk).link_token is None
    not_shared = client.post(f"/loom/{tree.pk}/share/{friend.pk}/revoke/", **HX)
    assert not_shared.status_code == 422 and "not shared with that user" in not_shared.text

    # Done right: stored, said, listed; sharing again changes the role, not a second row.
    ok = client.post(url, {"username": " bob ", "role": "viewer"}, **HX)
    assert ok.status_code == 200 and "bob can now read this tree." in ok.text
    ok = client.post(url, {"username": "bob", "role": "editor"}, **HX)
    assert "bob can now read and change this tree." in ok.text
    assert list(TreeShare.objects.values_list("user__username", "role")) == [("bob", "editor")]
    assert 'data-user="bob"' in client.get(f"/loom/{tree.pk}/share/").text

    # Only the owner manages sharing: an editor is refused, a stranger sees nothing.
    client.force_login(friend)
    assert client.get(f"/loom/{tree.pk}/share/").status_code == 403
    assert client.post(url, {"username": "bob", "role": "viewer"}, **HX).status_code == 403
    client.force_login(make_user("carl"))
    assert client.get(f"/loom/{tree.pk}/share/").status_code == 404
    for token in ("not-a-token", "x" * 65, "%00"):
        assert client.get(f"/loom/link/{token}/").status_code == 404
