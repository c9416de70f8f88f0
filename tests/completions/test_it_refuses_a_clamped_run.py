import pytest

from completions import pipeline
from completions.budget import usage_summary
from completions.client import BackendClient
from completions.errors import Clamped
from completions.schema import validate_params

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_in_the_client_instead_of_reading_a_clamped_stream(scripted):
    scripted.faults({"clamp": {"applied": 2}})
    params = validate_params(
        {"model": "scripted", "prompt": "Hi", "max_tokens": 50, "stream": True}
    )
    with BackendClient() as client, pytest.raises(Clamped) as caught:
        with client.stream(params):
            pass
    assert "applied=2" in caught.value.message


def test_it_stops_a_clamped_generation_stops_and_is_reported_refused(
    scripted, make_user, unconsumed_queue
):
    user = make_user()
    scripted.faults({"clamp": {"applied": 2}})
    generation = pipeline.start(
        user, {"model": "scripted", "prompt": "Hi", "max_tokens": 50}, kind="workbench"
    )
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    assert generation.state == "refused"
    assert generation.error_code == "max_tokens_clamped"
    assert generation.texts == [""]  # never shown as a (shorter) complete result
    assert usage_summary(user)["reserved"] == 0
