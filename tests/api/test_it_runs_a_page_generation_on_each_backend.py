"""The pages use the same routing: a Workbench run and an Inspect score against each
of two real backends (the local engine and a scripted one under the alias "tiny")."""

import pytest

from completions import pipeline
from completions.models import Generation
from tests.api.conftest import scripted_received

# transaction=True: the run's checkpoint thread writes through its own connection, which
# would not see a row left uncommitted in the test's transaction (it took the run for
# lost after one checkpoint interval and ended it "cancelled").
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SERVED = {"tiny": "weft/scripted-tiny", "smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct"}


@pytest.mark.parametrize("model", ["tiny", "smollm2-135m"])
def test_it_runs_a_workbench_generation_on_the_models_backend(
    two_backends, client, make_user, model
):
    client.force_login(make_user())
    form = {"model": model, "prompt": "Once upon a time", "max_tokens": "3", "n": "2"}
    response = client.post("/workbench/run/", form, headers={"HX-Request": "true"})
    assert response.status_code == 200
    generation = Generation.objects.get()
    assert generation.params["model"] == model
    pipeline.execute(generation.pk)  # the Celery task's body, in this process
    generation.refresh_from_db()
    assert generation.state == "done", generation.error_message
    assert generation.served_model == SERVED[model]
    assert all(choice["text"] for choice in generation.choices)
    sent = scripted_received(two_backends)
    assert [r["body"]["model"] for r in sent] == (["scripted"] if model == "tiny" else [])


@pytest.mark.parametrize("model", ["tiny", "smollm2-135m"])
def test_it_scores_a_text_in_inspect_on_the_models_backend(two_backends, client, make_user, model):
    client.force_login(make_user())
    data = {
        "source": "text",
        "model": model,
        "k": "2",
        "add_special_tokens": "on",
        "text": "Hi there",
    }
    response = client.post("/inspect/score/", data, follow=True)
    assert response.status_code == 200
    generation = Generation.objects.get(kind="inspect")
    assert generation.state == "done", generation.error_message
    assert generation.served_model == SERVED[model]
    assert len(scripted_received(two_backends)) == (1 if model == "tiny" else 0)
