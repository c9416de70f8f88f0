"""A user's page preferences, kept on the server so they follow the user to any
browser: today whether token views are drawn plain (no probability colours)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class PreferencesQuerySet(models.QuerySet):
    def plain_view(self, user: Any) -> bool:
        if not getattr(user, "is_authenticated", False):
            return False
        return bool(self.filter(user=user).values_list("plain_view", flat=True).first())

    def set_plain_view(self, user: Any, plain: bool) -> None:
        self.update_or_create(user=user, defaults={"plain_view": plain})


class Preferences(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="weft_preferences"
    )
    # Token views (Workbench, Loom, Inspect) without their probability colours: a long
    # text reads as prose; the popover still gives each token's probabilities.
    plain_view = models.BooleanField(default=False)

    objects = PreferencesQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "preferences"

    def __str__(self) -> str:
        return f"preferences of user {self.user_id}"
