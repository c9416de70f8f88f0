"""The Loom's choices: who wrote a node, how children are listed, what typing does."""

from __future__ import annotations

from django.db import models


class Author(models.TextChoices):
    HUMAN = "human", "human"
    MODEL = "model", "model"


class ChildOrder(models.TextChoices):
    """How the reader lists a node's children (the tree's setting, remembered)."""

    POSITION = "position", "as placed"
    RATING = "rating", "rating"
    LOGPROB = "logprob", "mean logprob"
    MODEL = "model", "model"
    NEWEST = "newest", "newest first"


class Rating(models.IntegerChoices):
    UP = 1, "thumbs up"
    DOWN = -1, "thumbs down"


class NoteUnit(models.TextChoices):
    """How the author's note's distance from the end of the path is counted."""

    NEWLINES = "newlines", "newlines"
    TOKENS = "tokens", "tokens"


class WriteMode(models.TextChoices):
    """What typing inside a segment of the document does (the tree's setting)."""

    IN_PLACE = "in_place", "change the node"
    SIBLING = "sibling", "make an edited sibling"


class ShareRole(models.TextChoices):
    """What a tree's owner gives another user; the owner's own role is "owner"."""

    EDITOR = "editor", "editor"
    VIEWER = "viewer", "viewer"
