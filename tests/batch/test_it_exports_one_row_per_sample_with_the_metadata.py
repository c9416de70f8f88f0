"""Export streams one row per sample — prompt index, sample index, prompt, text,
finish_reason, tokens, mean logprob and the uploaded metadata — as JSONL and CSV
that pandas (or the csv/json modules) read directly."""

import csv
import io
import json

import pytest
from django.http import StreamingHttpResponse

from batch.models import Batch, BatchItem
from completions.models import Generation

pytestmark = pytest.mark.django_db


def _world(user) -> Batch:
    batch = Batch.objects.create(owner=user, title="exp", params={"model": "scripted", "n": 2,
                                 "max_tokens": 4}, total=3, state="done")  # fmt: skip
    sample = {"finish_reason": "length", "tokens": 4}
    sent = Generation.objects.create(
        owner=user, kind="workbench", workload="batch", state="done", target={"batch": batch.pk},
        params={"model": "scripted", "prompt": "x", "n": 2, "max_tokens": 4, "seed": 1234,
                "temperature": 1.0, "top_p": 1.0, "stream": False},
    )  # fmt: skip
    BatchItem.objects.create(
        batch=batch,
        generation=sent,
        index=0,
        line=1,
        prompt='Say "hi",\nthen',
        state="done",
        metadata={"id": 7, "split": "dev", "text": "collides"},
        samples=[
            {**sample, "text": " <b>one</b>", "mean_logprob": -1.25},
            {**sample, "text": " two,\nlines", "mean_logprob": -0.5},
        ],
    )
    BatchItem.objects.create(
        batch=batch,
        index=1,
        line=2,
        prompt="é 🦉",
        state="done",
        metadata={"id": 8, "extra": [1, 2]},
        samples=[
            {**sample, "text": " x", "mean_logprob": None},
            {**sample, "text": "", "mean_logprob": -2.0},
        ],
    )
    BatchItem.objects.create(batch=batch, index=2, line=3, prompt="gone", state="failed",
                             metadata={"id": 9}, error_code="upstream_error")  # fmt: skip
    return batch


EXPECTED = [
    (0, 0, "done", 'Say "hi",\nthen', " <b>one</b>", "length", 4, -1.25, 7, "dev", "collides", None),
    (0, 1, "done", 'Say "hi",\nthen', " two,\nlines", "length", 4, -0.5, 7, "dev", "collides", None),
    (1, 0, "done", "é 🦉", " x", "length", 4, None, 8, None, None, [1, 2]),
    (1, 1, "done", "é 🦉", "", "length", 4, -2.0, 8, None, None, [1, 2]),
    (2, None, "failed", "gone", None, None, None, None, 9, None, None, None),
]  # fmt: skip
COLUMNS = ["prompt_index", "sample_index", "status", "prompt", "text", "finish_reason", "tokens",
           "mean_logprob", "id", "split", "meta.text", "extra"]  # fmt: skip


def _body(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode()


def test_it_exports_one_row_per_sample_with_the_metadata(client, make_user):
    user = make_user()
    client.force_login(user)
    batch = _world(user)

    response = client.get(f"/batch/{batch.pk}/export.jsonl")
    assert response["Content-Type"] == "application/x-ndjson"
    assert f'filename="weft-batch-{batch.pk}.jsonl"' in response["Content-Disposition"]
    lines = [json.loads(line) for line in _body(response).splitlines()]
    ours = ["error_code", "seed", "settings"]
    assert [list(line) == [*COLUMNS[:8], *ours, *COLUMNS[8:]] for line in lines] == [True] * 5
    # Each row's seed and settings as sent (every parameter), else the batch's own.
    assert [line["seed"] for line in lines] == [1234, 1234, None, None, None]
    assert lines[0]["settings"] == {"model": "scripted", "n": 2, "max_tokens": 4, "seed": 1234,
                                    "temperature": 1.0, "top_p": 1.0}  # fmt: skip
    assert lines[2]["settings"] == batch.params
    assert [tuple(line[c] for c in COLUMNS) for line in lines] == EXPECTED
    assert lines[4]["error_code"] == "upstream_error"

    response = client.get(f"/batch/{batch.pk}/export.csv")
    assert response["Content-Type"].startswith("text/csv")
    text = _body(response)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(rows) == 5
    for row, expected in zip(rows, EXPECTED, strict=True):
        as_csv = ["" if v is None else json.dumps(v) if isinstance(v, list) else str(v)
                  for v in expected]  # fmt: skip
        assert [row[c] for c in COLUMNS] == as_csv

    try:
        import pandas
    except ImportError:  # not a dependency: the csv/json modules checked the same above
        return
    frame = pandas.read_csv(io.StringIO(text))
    assert list(frame["prompt_index"]) == [0, 0, 1, 1, 2]
    assert frame["text"][1] == " two,\nlines"
    jl = pandas.read_json(
        io.StringIO(_body(client.get(f"/batch/{batch.pk}/export.jsonl"))), lines=True
    )
    assert list(jl["mean_logprob"].fillna(0)) == [-1.25, -0.5, 0, -2.0, 0]


def test_it_exports_only_the_owners_batch(client, make_user):
    batch = _world(make_user())
    client.force_login(make_user())
    assert client.get(f"/batch/{batch.pk}/export.csv").status_code == 404
    assert client.get(f"/batch/{batch.pk}/export.jsonl").status_code == 404
