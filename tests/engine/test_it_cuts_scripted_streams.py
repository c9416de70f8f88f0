"""Scripted faults: a response cut off mid-way, never reaching [DONE]."""

from __future__ import annotations

import httpx
import pytest

BODY = {"prompt": "The cat", "max_tokens": 10, "stream": True}


def read_events(client: httpx.Client, fault: str) -> tuple[list[str], Exception | None]:
    events: list[str] = []
    try:
        with client.stream(
            "POST", "/v1/completions", json=BODY, headers={"X-Scripted-Fault": fault}
        ) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(line)
    except httpx.HTTPError as exc:
        return events, exc
    return events, None


def test_it_drops_the_connection_after_n_tokens(scripted: httpx.Client) -> None:
    events, error = read_events(scripted, '{"cut_after": 3}')
    assert isinstance(error, httpx.RemoteProtocolError)
    assert len(events) == 3 and "data: [DONE]" not in events


def test_it_can_end_the_body_early_instead(scripted: httpx.Client) -> None:
    events, error = read_events(scripted, '{"cut_after": 2, "cut_mode": "eof"}')
    assert error is None and len(events) == 2 and "data: [DONE]" not in events


def test_it_cuts_a_json_body_too(scripted: httpx.Client) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        scripted.post(
            "/v1/completions",
            json={**BODY, "stream": False},
            headers={"X-Scripted-Fault": '{"cut_after": 1}'},
        )
    assert scripted.post("/v1/completions", json={**BODY, "stream": False}).status_code == 200
