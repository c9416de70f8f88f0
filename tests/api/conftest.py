import pytest


@pytest.fixture
def make_key(make_user):
    """An API key and its secret: make_key(user=None, name="test", budget=None)."""
    from api.models import ApiKey

    def make(user=None, name: str = "test", budget: int | None = None):
        return ApiKey.objects.create_key(user or make_user(), name, budget=budget)

    return make
