"""`make run` starts the local engine when nothing else is configured, or when
WEFT_BACKENDS lists it ("local"); not when every backend is another server."""

import pytest

from launch.checks import check_environment


@pytest.mark.parametrize(
    ("environment", "engine"),
    [
        ({}, True),
        ({"WEFT_BACKEND_URL": "http://gpu:8000/v1"}, False),
        ({"WEFT_BACKENDS": '[{"url": "local"}, {"url": "http://gpu:8000/v1"}]'}, True),
        ({"WEFT_BACKENDS": '[{"url": "http://gpu:8000/v1"}]'}, False),
        ({"WEFT_BACKENDS": '[{"url": "local"}]', "WEFT_BACKEND_URL": "http://gpu:8000/v1"}, False),
    ],
)
def test_it_decides_from_the_environment(monkeypatch, environment, engine):
    monkeypatch.delenv("WEFT_BACKEND_URL", raising=False)
    monkeypatch.delenv("WEFT_BACKENDS", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert check_environment()["engine"] is engine
