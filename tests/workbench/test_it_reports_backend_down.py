"""With the backend unreachable the page still works, says so, and a run is refused
with a clear message — nothing queued, and the answer is the notice alone (htmx swaps
it into #run-notice), so the prompt and settings in the form stay as typed.
In-process: nothing here needs a browser."""

import pytest

from completions.client import forget_backend_cache
from completions.models import Generation
from tests.support import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def down(settings):
    settings.WEFT_BACKEND_URL = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens
    forget_backend_cache()
    yield
    forget_backend_cache()


def test_it_reports_backend_down(down, client, make_user):
    client.force_login(make_user())
    page = client.get("/workbench/")
    assert page.status_code == 200
    assert "backend cannot be reached" in page.text
    assert 'id="model-error"' in page.text

    data = {"model": "llama-8b", "prompt": "Still here after the error", "n": "1",
            "max_tokens": "8"}  # fmt: skip
    notice = client.post("/workbench/run/", data, headers={"HX-Request": "true"}).text
    assert "The backend could not take the run" in notice
    assert "connect_error" in notice
    assert "Your prompt and settings are kept" in notice
    assert 'name="prompt"' not in notice  # the form is not sent back over the typed one
    assert not Generation.objects.exists()
