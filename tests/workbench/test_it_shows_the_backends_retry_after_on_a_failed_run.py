"""A run that failed on a Retry-After longer than Weft waits keeps those seconds,
and the Workbench's failed-run message shows them next to the code and request id."""

import pytest

from completions import pipeline
from completions.client import forget_backend_cache

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_shows_the_backends_retry_after_on_a_failed_run(engine, settings, make_user, client):
    settings.WEFT_BACKEND_MAX_RETRY_WAIT = 3.0
    settings.WEFT_GENERATION_QUEUE = "workbench-tests-unconsumed"  # run in this process
    forget_backend_cache()
    user = make_user()
    generation = pipeline.start(
        user, {"model": "scripted", "prompt": "The owl", "max_tokens": 5}, kind="workbench"
    )
    engine.fault({"status": 429, "retry_after": 60})
    pipeline.execute(generation.pk)

    generation.refresh_from_db()
    assert generation.state == "failed"
    assert generation.error_code == "rate_limited"
    assert generation.retry_after_seconds == 60
    assert generation.request_id

    client.force_login(user)
    page = client.get(f"/generations/{generation.pk}/result/").content.decode()
    assert "<code>rate_limited</code>" in page
    assert generation.request_id in page
    assert 'the backend asked to retry after <span class="retry-after">60</span> s' in page
