"""A batch's results as JSONL or CSV, streamed: one row per sample (a prompt with no
sample yet — pending, failed before any text — is one row with an empty sample
index), each row's seed and settings as sent (the batch's own until its prompt was
sent), the uploaded metadata as further columns. Both read straight into pandas
(`read_json(lines=True)`, `read_csv`), exactly.

"CSV for spreadsheets" is the same table made safe to open in Excel or LibreOffice:
a text cell that starts with =, +, -, @, a tab or a carriage return would be read as
a formula there (prompts, model output and metadata are anyone's text), so it gets a
leading single quote (OWASP's rule for CSV injection), and the file starts with a
UTF-8 byte order mark (without one Excel reads it in the local code page). Numbers
Weft wrote itself (indexes, token counts, mean logprobs) stay numbers."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from django.db import connection
from django.http import HttpRequest, StreamingHttpResponse

from batch.models import Batch, BatchItem
from core.downloads import download as download_stream

FORMATS = ("jsonl", "csv", "spreadsheet.csv")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
COLUMNS = ["prompt_index", "sample_index", "status", "prompt", "text", "finish_reason", "tokens",
           "mean_logprob", "error_code", "seed", "settings"]  # fmt: skip
# Not settings: the prompt is its own column, the transport is how it was carried.
_NOT_SETTINGS = ("prompt", "stream", "stream_options")
CHUNK = 500


def metadata_keys(batch: Batch) -> list[str]:
    """Every metadata key of the batch, in order of first appearance."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT k FROM (SELECT key AS k, min(i.index) AS first
                FROM {BatchItem._meta.db_table} i, jsonb_object_keys(i.metadata) AS key
                WHERE i.batch_id = %s AND jsonb_typeof(i.metadata) = 'object' GROUP BY key) s
                ORDER BY first, k""",  # noqa: S608 - the table name is ours
            [batch.pk],
        )
        return [row[0] for row in cursor.fetchall()]


def _column_names(keys: list[str]) -> dict[str, str]:
    """A metadata key that collides with one of ours is exported as meta.<key>."""
    names, taken = {}, set(COLUMNS)
    for key in keys:
        name = key
        while name in taken:
            name = f"meta.{name}"
        taken.add(name)
        names[key] = name
    return names


def rows(batch: Batch, keys: list[str]) -> Iterator[dict[str, Any]]:
    names = _column_names(keys)
    items = (
        BatchItem.objects.filter(batch=batch)
        .order_by("index")
        .values_list(
            "index",
            "state",
            "prompt",
            "samples",
            "error_code",
            "metadata",
            "sent",
            "generation__params",
        )  # fmt: skip
    )
    for index, state, prompt, samples, error_code, metadata, kept, sent in items.iterator(
        chunk_size=CHUNK
    ):
        meta = metadata if isinstance(metadata, dict) else {}
        extra = {names[k]: meta.get(k) for k in keys}
        # What was sent (every parameter, the drawn seed included; kept with the row, or
        # read from its run for a row started before rows kept it); else, not sent yet,
        # the batch's own settings.
        settings = {
            k: v for k, v in (kept or sent or batch.params or {}).items() if k not in _NOT_SETTINGS
        }
        base = {
            "prompt_index": index,
            "status": state,
            "prompt": prompt,
            "error_code": error_code,
            "seed": settings.get("seed"),
            "settings": settings,
        }
        for s, sample in enumerate(samples or [None]):
            sample = sample or {}
            yield {
                **base,
                "sample_index": s if samples else None,
                "text": sample.get("text"),
                "finish_reason": sample.get("finish_reason"),
                "tokens": sample.get("tokens"),
                "mean_logprob": sample.get("mean_logprob"),
                **extra,
            }


def _jsonl(batch: Batch) -> Iterator[str]:
    keys = metadata_keys(batch)
    order = COLUMNS + list(_column_names(keys).values())
    for row in rows(batch, keys):
        yield json.dumps({k: row[k] for k in order}, ensure_ascii=False) + "\n"


def _csv(batch: Batch, *, spreadsheet: bool = False) -> Iterator[str]:
    keys = metadata_keys(batch)
    header = COLUMNS + list(_column_names(keys).values())
    cell = _spreadsheet_cell if spreadsheet else _cell
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def take() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writerow([cell(name) for name in header])
    yield ("\ufeff" if spreadsheet else "") + take()
    for row in rows(batch, keys):
        writer.writerow([cell(row[k]) for k in header])
        yield take()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dict | list | bool):
        return json.dumps(value, ensure_ascii=False)
    return value


def _spreadsheet_cell(value: Any) -> Any:
    value = _cell(value)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def download(request: HttpRequest, batch: Batch, fmt: str) -> StreamingHttpResponse:
    if fmt == "jsonl":
        name = f"weft-batch-{batch.pk}.jsonl"
        return download_stream(request, _jsonl(batch), name, "application/x-ndjson")
    spreadsheet = fmt == "spreadsheet.csv"
    name = f"weft-batch-{batch.pk}{'-spreadsheet' if spreadsheet else ''}.csv"
    chunks = _csv(batch, spreadsheet=spreadsheet)
    return download_stream(request, chunks, name, "text/csv; charset=utf-8")
