"""The door's rule table, over HTTP: every rejected body is a 400 naming the field and
its code (all of them under error.errors); every accepted one passes validation.
One test per direction walks the whole table (a transactional test costs a database
flush, so 116 of them would take minutes)."""

import json

import httpx
import pytest

from tests.completions.test_it_validates_every_parameter_rule import ACCEPTED, REJECTED

pytestmark = pytest.mark.django_db(transaction=True)

BASE = {"model": "llama-8b", "prompt": "The capital of France is"}


@pytest.fixture
def post(proxy, api_key):
    base, _ = proxy
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {api_key()}"})
    # json.dumps writes NaN as the literal some clients send; httpx's json= refuses it.
    yield lambda body: client.post(
        "/completions",
        content=json.dumps(body),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    client.close()


def in_vocabulary(changes: dict) -> dict:
    """The scripted model has 687 tokens: keep the table's token ids inside it."""
    prompt = changes.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return {**changes, "prompt": [t % 600 for t in prompt]}
    return changes


def test_it_rejects_every_broken_rule(post):
    wrong = []
    for changes, field, code in REJECTED:
        response = post({**BASE, **changes})
        body = response.json()
        errors = [(e["field"], e["code"]) for e in body.get("error", {}).get("errors", [])]
        top = code if code == "full_vocab_prompt_too_long" else "invalid_request"
        if (
            response.status_code != 400
            or (field, code) not in errors
            or body["error"]["code"] != top
            or body["error"]["type"] != "invalid_request_error"
            or body["request_id"] != response.headers["x-request-id"]
        ):
            wrong.append((changes, response.status_code, body))
    assert not wrong
    assert len(REJECTED) > 70


def test_it_accepts_every_valid_body(post):
    wrong = []
    for changes in ACCEPTED:
        response = post({**BASE, **in_vocabulary(changes)})
        error = response.json().get("error") if response.status_code != 200 else None
        # Past validation: served, or refused for a reason that is not a schema rule (a
        # non-streaming max_tokens beyond the request window, the engine's own context).
        if error is not None and ("errors" in error or error["code"] == "invalid_request"):
            wrong.append((changes, response.status_code, error))
    assert not wrong
    assert len(ACCEPTED) > 40
