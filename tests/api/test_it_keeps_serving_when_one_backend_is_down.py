"""One of two backends down (nothing listens on the local engine's port): its
models drop out of the list, a request for one says the backend is unavailable, and
the other backend keeps serving the pages, the door and /health."""

import pytest

from completions.client import BackendClient, forget_backend_cache, get_model, list_models
from completions.errors import BackendUnavailable, ModelNotFound
from completions.schema import validate_params
from tests.support import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def local_down(two_backends, settings):
    settings.WEFT_BACKEND_URL = f"http://127.0.0.1:{free_port()}/v1"
    forget_backend_cache()
    return two_backends


def test_it_lists_and_serves_the_backend_that_answers(local_down, settings):
    settings.WEFT_DEFAULT_MODEL = "smollm2-135m"  # on the backend that is down
    forget_backend_cache()
    assert [(m.id, m.default) for m in list_models()] == [("tiny", True)]
    with BackendClient() as client:
        served = client.complete(
            validate_params({"model": "tiny", "prompt": "Hi", "max_tokens": 2})
        )
    assert served.model == "weft/scripted-tiny"


def test_it_says_unavailable_for_a_model_that_may_be_on_the_missing_backend(local_down):
    with pytest.raises(BackendUnavailable) as caught:
        get_model("smollm2-135m")
    assert caught.value.status == 503 and "backend unavailable" in caught.value.message
    assert "local" not in caught.value.message  # the backend's name stays in the log
    with BackendClient() as client, pytest.raises(BackendUnavailable):
        client.complete(validate_params({"model": "smollm2-135m", "prompt": "Hi", "max_tokens": 2}))


def test_it_keeps_the_pages_and_health_up(local_down, client, make_user):
    client.force_login(make_user())
    page = client.get("/workbench/").content.decode()
    assert 'value="tiny"' in page and "cannot be reached" not in page
    assert client.get("/health/ready").json()["checks"]["backend"]["ok"] is True


def test_it_finds_nothing_once_both_answer_and_neither_has_it(two_backends):
    with pytest.raises(ModelNotFound):
        get_model("llama-405b")
