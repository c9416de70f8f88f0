"""A Weft JSON file whose fields could not be stored (negative or huge
position, over-long strings, a seed past 2^63, NaN, an integer of thousands of
digits, NUL, malformed logprobs) is refused with a message naming the problem,
and nothing at all is imported."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from loom.models import Node, Tree

pytestmark = pytest.mark.django_db


def weft(**child) -> bytes:
    return json.dumps(
        {
            "format": "weft-loom",
            "version": 1,
            "tree": {"title": "t"},
            "nodes": [
                {"id": 1, "parent_id": None, "text": "root"},
                {"id": 2, "parent_id": 1, "text": "kept?"},
                {"id": 3, "parent_id": 1, "text": "child", **child},
            ],
        }
    ).encode()


GOOD_LOGPROBS = {"tokens": ["child"], "token_logprobs": [-0.5], "top_logprobs": [{"child": -0.5}]}
CASES = {
    "negative position": (weft(position=-1), "position must be between 0"),
    "huge position": (weft(position=2**40), "position must be between 0"),
    "long finish_reason": (weft(finish_reason="x" * 21), "finish_reason is longer than 20"),
    "long request_id": (weft(request_id="r" * 201), "request_id is longer than 200"),
    "long checkpoint": (weft(checkpoint="c" * 301), "checkpoint is longer than 300"),
    "seed past 2^63": (weft(seed=2**63), "seed must be between"),
    "seed of text": (weft(seed="7"), "seed must be an integer"),
    "NaN": (weft(seed=0).replace(b'"seed": 0', b'"seed": NaN'), "not valid JSON"),
    "thousands of digits": (
        weft(seed=0).replace(b'"seed": 0', b'"seed": ' + b"9" * 3000),
        "integer of 3,000 digits",
    ),
    "NUL in text": (weft(text="a\x00b"), "NUL character"),
    "NUL in extra": (weft(extra={"k": "\x00"}), "NUL character"),
    "tokens not a list": (weft(author="model", logprobs={"tokens": 5}), "tokens must be a list"),
    "logprobs of text": (
        weft(author="model", logprobs={**GOOD_LOGPROBS, "token_logprobs": ["high"]}),
        "token_logprobs must be a list of numbers",
    ),
    "tops not objects": (
        weft(author="model", logprobs={**GOOD_LOGPROBS, "top_logprobs": [[1]]}),
        "top_logprobs must be",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_it_refuses_the_file_with_a_message_and_imports_nothing(case, client, make_user):
    data, words = CASES[case]
    client.force_login(make_user())
    page = client.post("/loom/import/", {"file": SimpleUploadedFile("t.json", data)}, follow=True)
    assert page.status_code == 200
    assert "Import refused" in page.text and words in page.text, page.text[:3000]
    assert not Tree.objects.exists() and not Node.objects.exists()


def test_it_imports_the_same_file_with_valid_fields(client, make_user):
    client.force_login(make_user())
    data = weft(position=5, seed=2**63 - 1, author="model", logprobs=GOOD_LOGPROBS)
    client.post("/loom/import/", {"file": SimpleUploadedFile("t.json", data)})
    node = Node.objects.get(text="child")
    assert (node.position, node.seed, node.logprobs) == (5, 2**63 - 1, GOOD_LOGPROBS)
    page = client.get(f"/loom/{node.tree_id}/n/{node.pk}/")
    assert page.status_code == 200
