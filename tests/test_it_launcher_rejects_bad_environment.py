import os
import subprocess
import sys

import pytest

from tests.support import BASE_DIR


def launch(tmp_path, **overrides):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["WEFT_DATA_DIR"] = str(tmp_path)
    env.update(overrides)
    return subprocess.run(
        [sys.executable, "-m", "launch", "run"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("DATABASE_URL", "mysql://nope", "postgresql://"),
        ("DATABASE_URL", "postgresql://u@h:notaport/db", "postgresql://"),
        ("REDIS_URL", "http://localhost", "redis://"),
        ("DEBUG", "maybe", "boolean"),
        ("WEFT_PORT", "eighty", "integer"),
        ("WEFT_BACKEND_URL", "localhost:8001", "http(s)://"),
        ("WEFT_MONTHLY_TOKEN_BUDGET", "-5", ">= 0"),
        ("WEFT_CHECKPOINT_INTERVAL_SECONDS", "often", "number"),
        ("WEFT_SCHEDULER", "random", "fair, arrival"),
    ],
)
def test_it_stops_with_one_line_naming_the_variable(tmp_path, variable, value, expected):
    result = launch(tmp_path, **{variable: value})
    assert result.returncode == 2
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    assert lines[0].startswith(f"weft: {variable}=")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr
    # Nothing was started: no data directory contents beyond what settings may create.
    assert not (tmp_path / "pg").exists()
