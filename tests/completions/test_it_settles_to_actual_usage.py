import pytest

from completions import pipeline
from completions.budget import usage_summary
from completions.models import DailyUsage
from completions.signals import generation_finished

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_replaces_the_reservation_by_the_backends_usage(scripted, make_user, unconsumed_queue):
    user = make_user()
    finished = []
    generation_finished.connect(
        lambda sender, generation, **kw: finished.append(generation.state), weak=False
    )
    generation = pipeline.start(
        user,
        {"model": "scripted", "prompt": "Hi there", "max_tokens": 6, "n": 2, "logprobs": 1},
        kind="workbench",
    )
    assert usage_summary(user)["reserved"] == 9 + 12
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    assert generation.state == "done"
    assert generation.usage == {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}
    assert generation.charged_tokens == 21 and generation.reserved_tokens == 0
    assert all(
        c["finish_reason"] == "length" and len(c["logprobs"]["tokens"]) == 6
        for c in generation.choices
    )
    assert all(c["text"] == "".join(c["logprobs"]["tokens"]) for c in generation.choices)
    assert generation.request_id.startswith("req-")
    assert generation.served_model == "weft/scripted-tiny"
    summary = usage_summary(user)
    assert (summary["used"], summary["reserved"]) == (21, 0)
    day = DailyUsage.objects.get(user=user)
    assert (day.prompt_tokens, day.completion_tokens, day.runs) == (9, 12, 1)
    assert finished == ["done"]
    sent = scripted.requests()[-1]
    assert sent["headers"]["x-acs-workload"] == "interactive"
    generation_finished.disconnect()


def test_it_releases_a_failed_run_that_produced_nothing(scripted, make_user, unconsumed_queue):
    user = make_user()
    scripted.faults({"status": 500})
    generation = pipeline.start(
        user, {"model": "scripted", "prompt": "Hi", "max_tokens": 6}, kind="loom"
    )
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    assert generation.state == "failed"
    assert generation.error_code == "internal_error"
    assert generation.request_id.startswith("req-")
    assert generation.charged_tokens == 0
    assert usage_summary(user)["used"] == usage_summary(user)["reserved"] == 0


def test_it_charges_a_cut_stream_what_arrived_and_keeps_it(scripted, make_user, unconsumed_queue):
    user = make_user()
    scripted.faults({"cut_after": 4})
    generation = pipeline.start(
        user, {"model": "scripted", "prompt": [5, 6, 7], "max_tokens": 20}, kind="loom"
    )
    pipeline.execute(generation.pk)
    generation.refresh_from_db()
    assert generation.state == "failed" and generation.error_code == "stream_incomplete"
    assert generation.choices[0]["text"]
    assert generation.charged_tokens == 3 + 4
    assert usage_summary(user)["used"] == 7
