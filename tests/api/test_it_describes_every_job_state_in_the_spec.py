"""Real job bodies in every state — queued, succeeded (with its verbatim result),
failed (with its envelope), cancelled and expired — validate against the spec's
CompletionJob schema, and the 202's headers are the ones the spec lists."""

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone
from jsonschema import Draft202012Validator

from api.openapi import build_spec
from completions.lifecycle import expire
from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Shapes", "max_tokens": 3, "logprobs": 1}


def validator(name: str) -> Draft202012Validator:
    spec = build_spec()
    return Draft202012Validator(
        {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
    )


def test_it_matches_the_spec_in_every_state(jobs_api, proxy, api_key, monkeypatch):
    api, backend = jobs_api
    queued_api, _ = proxy  # a server whose jobs no worker runs
    auth = {"Authorization": f"Bearer {api_key()}"}
    http = httpx.Client(base_url=api, headers=auth, timeout=30)
    idle = httpx.Client(base_url=queued_api, headers=auth, timeout=30)
    job = validator("CompletionJob")
    bodies = {}

    submitted = idle.post("/completions", json=BODY, headers=ASYNC)
    spec = build_spec()["paths"]["/v1/completions"]["post"]["responses"]["202"]
    for name, header in spec["headers"].items():
        if header.get("required"):
            assert name.lower() in submitted.headers, name
    bodies["queued"] = submitted.json()
    bodies["cancelled"] = idle.delete(f"/harvest/{bodies['queued']['id']}").json()

    done = http.post("/completions", json=BODY, headers=ASYNC).json()
    bodies["succeeded"] = harvest_until(http, f"/harvest/{done['id']}", {"succeeded"})
    backend.faults({"status": 502})
    bad = http.post("/completions", json=BODY, headers=ASYNC).json()
    bodies["failed"] = harvest_until(http, f"/harvest/{bad['id']}", {"failed"})

    real = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real() + timedelta(hours=25))
    expire()
    bodies["expired"] = http.get(f"/harvest/{done['id']}").json()

    assert {state: body["status"] for state, body in bodies.items()} == {
        state: state for state in bodies
    }
    for state, body in bodies.items():
        errors = [e.message for e in job.iter_errors(body)]
        assert not errors, (state, errors)
    assert not list(validator("Completion").iter_errors(bodies["succeeded"]["result"]))
    assert not list(validator("ErrorEnvelope").iter_errors(bodies["failed"]["error"]))
