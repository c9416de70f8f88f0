"""A Workbench run's parameters are validated once: the form checks them against the
chosen model, and the door takes that result instead of checking the same body again
(pinning max_tokens and the stream options changes nothing a rule looks at)."""

from unittest import mock

import pytest

from completions.models import Generation
from completions.schema import CompletionParams

pytestmark = pytest.mark.django_db


def test_it_validates_the_params_of_a_workbench_run_once(
    client, make_user, scripted, unconsumed_queue
):
    user = make_user()
    client.force_login(user)
    validate = CompletionParams.model_validate
    with mock.patch.object(CompletionParams, "model_validate", wraps=validate) as spy:
        page = client.post(
            "/workbench/run/",
            {"model": "scripted", "prompt": "Hi", "max_tokens": "5", "n": "2"},
            HTTP_HX_REQUEST="true",
        )
    assert page.status_code == 200
    run = Generation.objects.get(owner=user)
    assert run.state == "queued" and run.params["max_tokens"] == 5 and run.params["n"] == 2
    assert run.params["stream"] is True and run.params["stream_options"] == {"include_usage": True}
    assert run.params["model"] == "scripted" and isinstance(run.params["seed"], int)
    assert spy.call_count == 1
