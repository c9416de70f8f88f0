import pytest

from completions import pipeline

pytestmark = pytest.mark.django_db


def test_it_returns_a_done_generation_with_prompt_logprobs(scripted, make_user):
    user = make_user()
    generation = pipeline.run_now(
        user,
        {
            "model": "scripted",
            "prompt": "Hi there",
            "max_tokens": 1,
            "echo": True,
            "prompt_logprobs": 0,
        },
    )
    assert generation.state == "done" and generation.kind == "inspect"
    choice = generation.choices[0]
    assert choice["text"].startswith("Hi there")
    assert choice["prompt_logprobs"][0] is None and len(choice["prompt_logprobs"]) == 9
    assert generation.charged_tokens == generation.usage["total_tokens"] == 10
    assert scripted.requests()[-1]["body"]["stream"] is False


def test_it_returns_a_failed_generation_with_code_and_request_id(scripted, make_user):
    user = make_user()
    scripted.faults({"status": 504})
    generation = pipeline.run_now(user, {"model": "scripted", "prompt": "Hi", "max_tokens": 1})
    assert generation.state == "failed"
    assert generation.error_code == "upstream_deadline"
    assert generation.request_id.startswith("req-")
    assert generation.charged_tokens == 0
