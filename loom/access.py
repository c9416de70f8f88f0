"""Who may do what with a tree: its owner, the users it is shared with (editor or
viewer), and strangers (None).

Placeholder until h22s merges: h22s's access.py (the TreeShare model, the read-only
link) replaces this file; role_for / can_edit / can_view / share keep these
signatures. Here a share is a key in the cache (Redis: every process sees it), so
the live features can be tested with several users before the real model exists
(not the tree's settings: those are the generation defaults sent to the door)."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache

OWNER, EDITOR, VIEWER = "owner", "editor", "viewer"


def _key(tree_id: int, user_id: int) -> str:
    return f"loom-placeholder-share-{tree_id}-{user_id}"


def role_for(user: Any, tree_id: int) -> str | None:
    """The user's role on the tree, or None (a stranger, or no such tree)."""
    from loom.models import Tree

    if user is None or not getattr(user, "is_authenticated", False):
        return None
    owner_id = Tree.objects.filter(pk=tree_id).values_list("owner_id", flat=True).first()
    if owner_id is None:
        return None
    if owner_id == user.pk:
        return OWNER
    return cache.get(_key(tree_id, user.pk))


def can_edit(role: str | None) -> bool:
    return role in (OWNER, EDITOR)


def can_view(role: str | None) -> bool:
    return role in (OWNER, EDITOR, VIEWER)


def share(tree: Any, user: Any, role: str | None) -> None:
    """Give `user` the role on `tree` (None revokes), and tell the tree's open sockets."""
    from loom import live

    if role is None:
        cache.delete(_key(tree.pk, user.pk))
    else:
        cache.set(_key(tree.pk, user.pk), role, timeout=None)
    live.access_changed(tree.pk, user.pk)
