"""The owner's share dialog (who may read or change the tree) and the read-only link.
The rules are loom/access.py's; these views only read the form and show the result."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.forms import first_error
from loom import access
from loom.access import tree_for
from loom.forms import ShareForm
from loom.models import Tree

# As the other loom refusals: htmx swaps a 422 (the message shows in the dialog).
INVALID = 422


def _panel(request, tree: Tree, *, error: str = "", notice: str = "", status: int = 200):
    """The dialog's content (htmx), else the whole share page."""
    ctx = {
        "tree": tree,
        "error": error,
        "notice": notice,
        "link_url": request.build_absolute_uri(reverse("loom:link", args=[tree.link_token]))
        if tree.link_token
        else "",
        **access.members(tree),
    }
    template = "loom/share.html#panel" if request.htmx else "loom/share.html"
    return render(request, template, ctx, status=status)


def _done(request, tree: Tree, *, error: str = "", notice: str = ""):
    if request.htmx:
        return _panel(request, tree, error=error, notice=notice, status=INVALID if error else 200)
    if error:
        messages.error(request, error)
    elif notice:
        messages.success(request, notice)
    return redirect("loom:share", tree.pk)


@require_GET
def share_page(request, tree_id: int):
    return _panel(request, tree_for(request, tree_id, "own"))


@require_POST
def share_add(request, tree_id: int):
    """Share with a user by username as editor or viewer (or change their role)."""
    tree = tree_for(request, tree_id, "own")
    form = ShareForm(request.POST)
    if not form.is_valid():
        return _done(request, tree, error=f"Not shared: {first_error(form)}")
    username, role = form.cleaned_data["username"], form.cleaned_data["role"]
    try:
        access.share(tree, username, role)
    except access.ShareRefused as exc:
        return _done(request, tree, error=f"Not shared: {exc}")
    return _done(request, tree, notice=f"{username.strip()} can now {_can(role)} this tree.")


@require_POST
def share_revoke(request, tree_id: int, user_id: int):
    tree = tree_for(request, tree_id, "own")
    shared = tree.shares.select_related("user").filter(user_id=user_id).first()
    if not access.revoke(tree, user_id) or shared is None:
        return _done(request, tree, error="Not revoked: the tree is not shared with that user.")
    return _done(
        request, tree, notice=f"{shared.user.get_username()} can no longer open this tree."
    )


@require_POST
def share_link(request, tree_id: int):
    """Turn the read-only link on (on=1) or off (on=0: every link holder loses it)."""
    tree = tree_for(request, tree_id, "own")
    on = request.POST.get("on", "")
    if on not in ("0", "1"):
        return _done(request, tree, error="Turn the link on or off.")
    access.set_link(tree, on == "1")
    notice = (
        "The read-only link is on: anyone signed in to this Weft who has it can read this tree."
        if on == "1"
        else "The read-only link is off: nobody can open the tree with it any more."
    )
    return _done(request, tree, notice=notice)


@require_GET
def open_link(request, token: str):
    """The read-only link: remembered for the user (the tree stays in their list while
    the link is on), then the tree. A wrong or revoked token is a 404."""
    tree = access.open_link(request.user, token)
    return redirect("loom:tree", tree.pk)


def _can(role: str) -> str:
    return "read and change" if role == access.EDITOR else "read"
