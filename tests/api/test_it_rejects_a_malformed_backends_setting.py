"""A malformed WEFT_BACKENDS stops the launcher with one line naming the variable
and the entry — without echoing the value, which may hold backend keys."""

import pytest

from tests.test_it_launcher_rejects_bad_environment import launch

SECRET = "sk-do-not-print-me"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("llama=http://gpu:8000/v1", "JSON list"),
        ("[]", "non-empty JSON list"),
        (f'[{{"url": "gpu:8000", "api_key": "{SECRET}"}}]', 'backend 1: "url" must be'),
        (f'[{{"url": "local"}}, {{"url": "http://gpu/v1", "key": "{SECRET}"}}]', "backend 2: unknown key 'key'"),
        ('[{"url": "http://gpu/v1", "models": ["llama-8b"]}]', '"models" must map short ids'),
        ('[{"url": "http://gpu/v1", "models": {" spaced ": "m"}}]', '"models" must map short ids'),
        ('[{"url": "http://gpu/v1", "api_key": 5}]', '"api_key" must be a string'),
    ],
)  # fmt: skip
def test_it_stops_with_one_line_naming_the_variable_and_entry(tmp_path, value, expected):
    result = launch(tmp_path, WEFT_BACKENDS=value)
    assert result.returncode == 2
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    assert lines[0].startswith("weft: WEFT_BACKENDS=…: ")
    assert expected in lines[0]
    assert SECRET not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
