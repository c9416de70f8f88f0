"""A JSONL line whose metadata nests ~1,200 levels deep parses (json.loads goes that
deep) but stopped the storability walk with a RecursionError: a 500. Metadata nests at
most MAX_DEPTH levels; a deeper line is refused with its number, nothing created."""

import html
import json

import pytest

from batch.models import Batch, BatchItem
from batch.uploads import MAX_DEPTH
from completions.models import Generation
from tests.batch.conftest import upload

pytestmark = pytest.mark.django_db


def nested(levels: int) -> str:
    """A line whose whole object is `levels` levels deep (the line itself is one)."""
    inner = "[" * (levels - 1) + "]" * (levels - 1)
    return '{"prompt": "deep", "meta": ' + inner + "}"


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1_200, 5_000])
def test_it_refuses_metadata_nested_too_deep(engine, client, make_user, levels):
    client.force_login(make_user())
    content = json.dumps({"prompt": "fine", "k": {"a": [1]}}) + "\n" + nested(levels) + "\n"
    response = upload(client, content, "deep.jsonl")
    assert response.status_code == 400
    text = html.unescape(response.content.decode())
    # Past ~4,000 levels json.loads itself stops: the same refusal.
    what = "a metadata field" if levels < 4_000 else "the line"
    assert f"line 2: {what} nests deeper than {MAX_DEPTH} levels" in text, text[-3000:]
    assert Batch.objects.count() == 0 and BatchItem.objects.count() == 0
    assert Generation.objects.count() == 0 and engine.completions() == []


def test_it_takes_metadata_as_deep_as_the_bound(engine, client, make_user):
    client.force_login(make_user())
    response = upload(client, nested(MAX_DEPTH) + "\n", "deep.jsonl")
    assert response.status_code == 302, html.unescape(response.content.decode())[-800:]
    item = BatchItem.objects.get()
    depth, value = 1, item.metadata["meta"]
    while value:
        depth, value = depth + 1, value[0]
    assert depth + 1 == MAX_DEPTH  # the object, "meta" and its lists
