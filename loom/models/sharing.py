"""Who else may open a tree: a share with a user (editor or viewer) and the grants of
its read-only link. The rules are in loom/access.py."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from loom.models.choices import ShareRole
from loom.models.tree import Tree


class TreeShare(models.Model):
    """The owner shared the tree with `user`, as editor or viewer."""

    tree = models.ForeignKey(Tree, on_delete=models.DB_CASCADE, related_name="shares")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="loom_shares"
    )
    role = models.CharField(max_length=6, choices=ShareRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tree", "user"], name="loom_share_once"),
            models.CheckConstraint(
                condition=models.Q(role__in=ShareRole.values), name="loom_share_role"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.role} on {self.tree_id}"


class LinkGrant(models.Model):
    """A signed-in user opened the tree's read-only link: the tree is in their list
    ("via link") while the link stays on; turning it off deletes every grant."""

    tree = models.ForeignKey(Tree, on_delete=models.DB_CASCADE, related_name="link_grants")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="loom_link_grants"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tree", "user"], name="loom_link_once")]

    def __str__(self) -> str:
        return f"{self.user_id} via link on {self.tree_id}"
