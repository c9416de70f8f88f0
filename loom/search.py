"""Finding nodes: their text or their tags, any part of a word or whole words only
("King" then no longer finds "asking"). One query; case-insensitive."""

from __future__ import annotations

import re
from typing import NamedTuple

from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Left

from loom.models import Node

LIMIT = 50
PREVIEW = 400

# Postgres's own regular expressions (AREs): \m and \M are the start and end of a word.
# re.escape escapes only punctuation, which an ARE then reads as itself.
_TAG_HIT = """EXISTS (SELECT 1 FROM jsonb_array_elements_text(
    CASE WHEN jsonb_typeof(loom_node.tags) = 'array' THEN loom_node.tags ELSE '[]'::jsonb END
) AS t(tag) WHERE t.tag ~* %s)"""


def _edges(q: str, whole: bool) -> tuple[bool, bool]:
    """Whether to bound the match at its start and end: only where the query itself
    starts or ends with a word character ("King," is "King" followed by a comma)."""
    return whole and bool(re.match(r"\w", q)), whole and bool(re.search(r"\w$", q))


def pattern(q: str, whole: bool) -> str:
    start, end = _edges(q, whole)
    return ("\\m" if start else "") + re.escape(q) + ("\\M" if end else "")


def search(nodes: QuerySet, q: str, *, whole: bool = False) -> QuerySet:
    """The nodes of `nodes` whose text or one of whose tags matches `q`."""
    regex = pattern(q, whole)
    text = Q(text__iregex=regex)
    return (
        nodes.annotate(tag_hit=RawSQL(_TAG_HIT, [regex]), preview=Left("text", PREVIEW))
        .filter(text | Q(tag_hit=True))
        .only("id", "tags")
    )


class Hit(NamedTuple):
    node: Node
    before: str
    match: str
    after: str
    tags: list[str]  # the tags that match


def hits(rows, q: str, *, whole: bool = False, width: int = 60) -> list[Hit]:
    """(node, text around the first match, the matching tags) for the page to show."""
    start, end = _edges(q, whole)
    found = re.compile(
        (r"\b" if start else "") + re.escape(q) + (r"\b" if end else ""), re.IGNORECASE
    )
    out = []
    for node in rows:
        text = node.preview
        m = found.search(text)
        tags = [t for t in node.tags or [] if isinstance(t, str) and found.search(t)]
        if m is None:
            out.append(Hit(node, text[: width * 2], "", "", tags))
            continue
        at = max(0, m.start() - width)
        out.append(
            Hit(node, text[at : m.start()], m.group(), text[m.end() : m.end() + width], tags)
        )
    return out
