"""A Weft JSON import holding Infinity, -Infinity or NaN (which Python's json writes
and reads, but JSON does not allow) is refused saying so — not as "a character JSON
does not allow there (single quotes…)" — and nothing is imported; the word inside a
string is only text, and another bad character keeps its own diagnosis."""

import json

import pytest

from loom.formats.importers import ImportRefused, import_file
from loom.models import Tree

pytestmark = pytest.mark.django_db


def weft(seed: str, text: str = "child") -> bytes:
    data = {
        "format": "weft-loom",
        "version": 1,
        "tree": {"title": "t"},
        "nodes": [
            {"id": 1, "parent_id": None, "text": "root " * 40},
            {"id": 2, "parent_id": 1, "text": text, "seed": 0},
        ],
    }
    return json.dumps(data).encode().replace(b'"seed": 0', b'"seed": ' + seed.encode())


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN"])
def test_it_says_infinity_or_nan(make_user, value):
    with pytest.raises(ImportRefused) as refused:
        import_file(make_user(), weft(value), filename="tree.json")
    message = str(refused.value)
    assert "holds Infinity or NaN" in message and "single quotes" not in message
    assert not Tree.objects.exists()


def test_it_keeps_other_diagnoses(make_user):
    with pytest.raises(ImportRefused) as refused:
        import_file(make_user(), weft("x", text="Infinity NaN"), filename="tree.json")
    assert "Infinity or NaN" not in str(refused.value)
    assert "a character JSON does not allow" in str(refused.value)
