"""Prompts, model output and metadata are anyone's text: a cell starting with =, +, -,
@, a tab or a carriage return is a formula to Excel and LibreOffice. "CSV for
spreadsheets" gives such a cell a leading single quote (OWASP); the plain CSV beside it
keeps every cell exactly as stored, for pandas and scripts; the page says which is which."""

import csv
import html
import io

import pytest

from batch.models import Batch, BatchItem

pytestmark = pytest.mark.django_db

FORMULAS = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1:A2)", "\tTAB", "\rCR"]
SAFE = ["plain", " =not first", "'quoted", "é 🦉", ""]


def _batch(user) -> Batch:
    batch = Batch.objects.create(owner=user, title="sheet", params={"model": "scripted", "n": 1,
                                 "max_tokens": 4}, total=2, state="done")  # fmt: skip
    BatchItem.objects.create(
        batch=batch, index=0, line=1, prompt="=1+2", state="done",
        metadata={**{f"f{i}": v for i, v in enumerate(FORMULAS)}, "=col": "x", "count": 3},
        samples=[{"text": "@me", "finish_reason": "length", "tokens": 4, "mean_logprob": -0.5}],
    )  # fmt: skip
    BatchItem.objects.create(
        batch=batch, index=1, line=2, prompt="safe", state="done",
        metadata={**{f"f{i}": v for i, v in enumerate(SAFE)}, "=col": "-", "count": -7},
        samples=[{"text": "-dash", "finish_reason": "stop", "tokens": 1, "mean_logprob": -2.25}],
    )  # fmt: skip
    return batch


def table(response) -> tuple[str, list[list[str]]]:
    text = b"".join(response.streaming_content).decode()
    return text, list(csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline="")))


def test_it_escapes_formula_cells_only_in_the_spreadsheet_csv(client, make_user):
    user = make_user()
    client.force_login(user)
    batch = _batch(user)
    plain_text, plain = table(client.get(f"/batch/{batch.pk}/export.csv"))
    response = client.get(f"/batch/{batch.pk}/export.spreadsheet.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert f'filename="weft-batch-{batch.pk}-spreadsheet.csv"' in response["Content-Disposition"]
    sheet_text, sheet = table(response)

    # The plain CSV is exactly what was stored (no BOM, no quote added).
    assert not plain_text.startswith("\ufeff")
    header = plain[0]
    first = dict(zip(header, plain[1], strict=True))
    assert first["prompt"] == "=1+2" and first["text"] == "@me" and first["mean_logprob"] == "-0.5"
    assert [first[f"f{i}"] for i in range(len(FORMULAS))] == FORMULAS
    assert "=col" in header

    # The spreadsheet CSV: a BOM for Excel, then the same table with formula starts quoted.
    assert sheet_text.startswith("\ufeff")
    assert [len(row) for row in sheet] == [len(row) for row in plain]
    numbers = {header.index("mean_logprob"), header.index("count")}  # JSON numbers
    changed = 0
    for sheet_row, plain_row in zip(sheet, plain, strict=True):
        for column, (got, stored) in enumerate(zip(sheet_row, plain_row, strict=True)):
            if stored.startswith(("=", "+", "-", "@", "\t", "\r")) and column not in numbers:
                changed += 1
                assert got == "'" + stored
            else:
                assert got == stored
    # header "=col"; row 1: the prompt, the text, six metadata cells; row 2: "-dash", "-".
    assert changed == 1 + 8 + 2
    # Numbers Weft wrote stay numbers (a negative logprob or count is no formula).
    second = dict(zip(sheet[0], sheet[2], strict=True))
    assert second["mean_logprob"] == "-2.25" and second["count"] == "-7"
    assert second["'=col"] == "'-"


def test_it_says_which_csv_is_which_on_the_batch_page(client, make_user):
    user = make_user()
    client.force_login(user)
    batch = _batch(user)
    page = html.unescape(client.get(f"/batch/{batch.pk}/").content.decode())
    assert f'href="/batch/{batch.pk}/export.csv"' in page
    assert f'href="/batch/{batch.pk}/export.spreadsheet.csv"' in page
    assert "CSV for spreadsheets" in page
    assert "plain CSV is exact, for pandas and scripts" in page
    assert "safe to open in" in page and "gets a leading '" in page


def test_it_keeps_other_users_off_the_spreadsheet_csv(client, make_user):
    batch = _batch(make_user())
    client.force_login(make_user())
    assert client.get(f"/batch/{batch.pk}/export.spreadsheet.csv").status_code == 404
    client.force_login(batch.owner)
    assert client.get(f"/batch/{batch.pk}/export.xlsx").status_code == 404
