"""Export one entry or the whole history as JSON and JSONL, streamed."""

import json

import pytest

from tests.workbench.helpers import make_generation
from workbench.models import Run

LOGPROBS = {
    "tokens": [" a", " b"],
    "token_logprobs": [-0.1, -2.0],
    "top_logprobs": [{" a": -0.1, " c": -2.5}, {" b": -2.0, " a": -0.5}],
    "text_offset": [0, 2],
}


@pytest.mark.django_db
def test_it_exports_history_streamed(client, make_user):
    user = make_user()
    first = Run.objects.save_generation(
        make_generation(user, texts=[" a b", "second"], logprobs=LOGPROBS, prompt="P1"),
        title="one",
    )
    second = Run.objects.save_generation(
        make_generation(user, texts=["x", "y", "z"], prompt="P2"), choice_indexes=[0, 2]
    )
    client.force_login(user)

    response = client.get("/history/export.jsonl")
    assert response.streaming and response["Content-Type"] == "application/x-ndjson"
    assert "attachment" in response["Content-Disposition"]
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert [(x["run_id"], x["index"], x["text"]) for x in lines] == [
        (first.pk, 0, " a b"), (first.pk, 1, "second"), (second.pk, 0, "x"), (second.pk, 2, "z")
    ]  # fmt: skip
    top = lines[0]
    assert top["prompt"] == "P1" and top["parameters"]["max_tokens"] == 16
    assert top["model_checkpoint"] == "weft/scripted-tiny" and top["request_id"] == "req-test-1"
    assert top["finish_reason"] == "length"
    assert top["tokens"] == [" a", " b"] and top["token_logprobs"] == [-0.1, -2.0]
    assert "tokens" not in lines[1]  # no logprobs were asked for that sample

    response = client.get("/history/export.json")
    assert response.streaming
    runs = json.loads(b"".join(response.streaming_content))
    assert [r["id"] for r in runs] == [first.pk, second.pk]
    assert [s["text"] for s in runs[1]["samples"]] == ["x", "z"]

    one = client.get(f"/history/{second.pk}/export.jsonl")
    assert [json.loads(x)["text"] for x in b"".join(one.streaming_content).splitlines()] == [
        "x", "z"
    ]  # fmt: skip
    one = json.loads(b"".join(client.get(f"/history/{first.pk}/export.json").streaming_content))
    assert one[0]["title"] == "one" and len(one[0]["samples"]) == 2
    assert client.get("/history/export.csv").status_code == 404
