"""The JSON log formatter writes an exception's frames and types, never its messages:
a database error's message holds the statement's values and the server's detail (here
a user's text), which must not reach the log."""

import json
import logging

import pytest
from django.db import connection, transaction

from core.logs import JsonFormatter

pytestmark = pytest.mark.django_db

SECRET = "a user's words 5f0c"


def _line(exc_info) -> dict:
    record = logging.LogRecord("weft.test", logging.ERROR, __file__, 1, "it failed", (), exc_info)
    return json.loads(JsonFormatter().format(record))


def _fail_in_the_database() -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT %s::integer", [SECRET])


def test_it_keeps_a_database_errors_detail_out_of_the_line():
    try:
        try:
            _fail_in_the_database()
        except Exception as exc:
            raise RuntimeError(f"while saving {SECRET}") from exc
    except RuntimeError:
        import sys

        line = _line(sys.exc_info())
    text = json.dumps(line)
    assert SECRET not in text and "5f0c" not in text
    exception = line["exception"]
    # The frames and the types are there, oldest first, as Python prints a chain.
    assert "_fail_in_the_database" in exception
    assert exception.index("psycopg.errors.InvalidTextRepresentation") < exception.index(
        "builtins.RuntimeError"
    )
    assert "direct cause" in exception and "django.db.utils.DataError" in exception
    assert line["message"] == "it failed"
