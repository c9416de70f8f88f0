from tests.completions.conftest import budget_of  # noqa: F401 - the same fixture
