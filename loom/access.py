"""Who may do what with a tree: the one door every tree-scoped view, fragment, export
and socket goes through.

Roles, as in Google Docs: the **owner** manages sharing and deletes the tree; an
**editor** changes its content (generate, write, edit, split, merge, move, delete
nodes, bookmark, tag, rate, undo, the memory and note, the tree's settings, rename);
a **viewer** reads, walks, searches and exports. A signed-in user who opened the
tree's read-only link is a viewer too, until the owner turns the link off. Anyone
else is a stranger (None): every route answers 404, as for a tree that does not
exist, so ids cannot be probed. A viewer asking to change something gets a 403 and
nothing changes.

Every change of a role (a share given, changed or revoked, the link turned off) is
told at once to the tree's open sockets (loom/consumers.py re-checks and closes them
or tells the page), once the change has committed."""

from __future__ import annotations

import re
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.http import Http404

from loom.live import access_changed
from loom.models import LinkGrant, ShareRole, Tree, TreeShare

OWNER, EDITOR, VIEWER = "owner", "editor", "viewer"
ROLES = (OWNER, EDITOR, VIEWER)
# What each `need` of tree_for() lets in.
_ALLOWED = {"view": ROLES, "edit": (OWNER, EDITOR), "own": (OWNER,)}
_REFUSED = {
    "edit": "You can read this tree but not change it: its owner shared it with you as a viewer.",
    "own": "Only the tree's owner can do that.",
}


_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")


class ReadOnly(PermissionDenied):
    """A member asked for more than their role allows (rendered as a 403 that says so)."""


def _with_role(trees: QuerySet, user: Any) -> QuerySet:
    """Trees annotated with the user's share role and whether they hold a live link grant."""
    return trees.annotate(
        share_role=Subquery(
            TreeShare.objects.filter(tree=OuterRef("pk"), user_id=user.pk).values("role")[:1]
        ),
        via_link=Exists(LinkGrant.objects.filter(tree=OuterRef("pk"), user_id=user.pk)),
    )


def _role_of(
    owner_id: int, user_id: int, share_role: str | None, via_link: bool, token
) -> str | None:
    if owner_id == user_id:
        return OWNER
    if share_role in (EDITOR, VIEWER):
        return share_role
    # A grant without a token cannot outlive the link (turning it off deletes the
    # grants in the same transaction); checking both costs nothing.
    if via_link and token:
        return VIEWER
    return None


def role_for(user: Any, tree_id: int) -> str | None:
    """The user's role on the tree, or None (a stranger, or no such tree). One query."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    row = (
        _with_role(Tree.objects.filter(pk=tree_id), user)
        .values_list("owner_id", "share_role", "via_link", "link_token")
        .first()
    )
    return None if row is None else _role_of(row[0], user.pk, row[1], row[2], row[3])


def can_edit(role: str | None) -> bool:
    return role in (OWNER, EDITOR)


def can_view(role: str | None) -> bool:
    return role in ROLES


def tree_for(request: Any, tree_id: int, need: str = "view") -> Tree:
    """The tree, if the request's user may do `need` ("view", "edit", "own") with it:
    a stranger gets a 404, a member without the role a 403 (ReadOnly). The role is
    left on the request (request.tree_role) and the tree (tree.role) for templates."""
    user = request.user
    tree = (
        _with_role(Tree.objects.filter(pk=tree_id), user).first() if user.is_authenticated else None
    )
    role = (
        None
        if tree is None
        else _role_of(tree.owner_id, user.pk, tree.share_role, tree.via_link, tree.link_token)
    )
    if tree is None or role is None:
        raise Http404("no such tree")
    if role not in _ALLOWED[need]:
        raise ReadOnly(_REFUSED[need])
    request.tree_role = role
    tree.role = role
    return tree


def shared_with(user: Any) -> list[Tree]:
    """The trees other users shared with `user` or whose link `user` opened (the link
    still on), each with .role and .owner loaded, most recently changed first."""
    # The user's shares and grants pick the trees (by their user indexes), not a scan of
    # every tree with a subquery each.
    shared = TreeShare.objects.filter(user_id=user.pk).values("tree_id")
    linked = LinkGrant.objects.filter(user_id=user.pk).values("tree_id")
    trees = (
        _with_role(Tree.objects.exclude(owner_id=user.pk), user)
        .filter(Q(pk__in=shared) | Q(pk__in=linked, link_token__isnull=False))
        .select_related("owner")
        .order_by("-updated_at")
    )
    out = []
    for tree in trees:
        tree.role = _role_of(
            tree.owner_id, user.pk, tree.share_role, tree.via_link, tree.link_token
        )
        out.append(tree)
    return out


def visible_trees(user: Any) -> QuerySet:
    """Every tree the user may read: their own, shared with them, or by a live link."""
    shared = TreeShare.objects.filter(user_id=user.pk).values("tree_id")
    linked = LinkGrant.objects.filter(user_id=user.pk).values("tree_id")
    return Tree.objects.filter(
        Q(owner_id=user.pk) | Q(pk__in=shared) | Q(pk__in=linked, link_token__isnull=False)
    )


def editable_trees(user: Any) -> QuerySet:
    """Every tree the user may change: their own and those shared with them as editor."""
    shared = TreeShare.objects.filter(user_id=user.pk, role=EDITOR).values("tree_id")
    return Tree.objects.filter(Q(owner_id=user.pk) | Q(pk__in=shared))


# --- changing who may do what (the owner's share dialog) -------------------------------


class ShareRefused(ValueError):
    """A share the dialog cannot make (shown to the owner; nothing is stored)."""


@transaction.atomic
def share(tree: Tree, who: Any, role: str | None) -> TreeShare | None:
    """Share the tree with `who` (a user, or a username as the dialog sends it) as
    `role` (editor or viewer), or change their role; role None revokes. Raises
    ShareRefused: no such user, the owner, a bad role. Nothing is stored then."""
    if isinstance(who, str):
        username = who.strip()
        if not username:
            raise ShareRefused("Write the username of the person to share with.")
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise ShareRefused(f"There is no user called “{username[:150]}” on this Weft.")
    else:
        user = who
    if role is None:
        revoke(tree, user.pk)
        return None
    if role not in ShareRole.values:
        raise ShareRefused("Choose a role: editor or viewer.")
    if user.pk == tree.owner_id:
        raise ShareRefused("You own this tree already; share it with someone else.")
    made, _created = TreeShare.objects.update_or_create(
        tree=tree, user=user, defaults={"role": role}
    )
    access_changed(tree.pk, user.pk)
    return made


@transaction.atomic
def revoke(tree: Tree, user_id: int) -> bool:
    """Take the tree away from one user it was shared with (their link grant too: the
    owner means them to lose it). False when there was no share."""
    gone, _ = TreeShare.objects.filter(tree=tree, user_id=user_id).delete()
    granted, _ = LinkGrant.objects.filter(tree=tree, user_id=user_id).delete()
    if gone or granted:
        access_changed(tree.pk, user_id)
    return bool(gone)


@transaction.atomic
def set_link(tree: Tree, on: bool) -> str | None:
    """Turn the read-only link on (a new token) or off (every holder cut at once: the
    token and every grant go in one transaction). Returns the token, or None."""
    if on:
        if not tree.link_token:
            tree.link_token = secrets.token_urlsafe(24)
            Tree.objects.filter(pk=tree.pk).update(link_token=tree.link_token)
        return tree.link_token
    if tree.link_token or tree.link_grants.exists():
        tree.link_token = None
        Tree.objects.filter(pk=tree.pk).update(link_token=None)
        LinkGrant.objects.filter(tree=tree).delete()
        access_changed(tree.pk, None)
    return None


def open_link(user: Any, token: str) -> Tree:
    """The tree whose live link is `token`, the grant recorded for `user` (so it stays in
    their list); 404 for a wrong or revoked token."""
    # Only token_urlsafe's alphabet reaches the query (a NUL would be a database error).
    if not _TOKEN.fullmatch(token or ""):
        raise Http404("no such link")
    tree = Tree.objects.filter(link_token=token).first()
    if tree is None:
        raise Http404("no such link")
    if tree.owner_id != user.pk:
        LinkGrant.objects.get_or_create(tree=tree, user=user)
    return tree


def members(tree: Tree) -> dict[str, Any]:
    """Who can see the tree, for the share dialog: the shares and the link holders."""
    shares = list(tree.shares.select_related("user").order_by("user__username"))
    shared_ids = {s.user_id for s in shares}
    holders = [
        g.user
        for g in tree.link_grants.select_related("user").order_by("user__username")
        if g.user_id not in shared_ids
    ]
    return {"shares": shares, "link_holders": holders if tree.link_token else []}
