"""The whole path once more on the real model (SmolLM2 via llama.cpp): three streamed
samples with logprobs, a branch from an alternative, save, search, JSONL export."""

import pytest

from tests.workbench.helpers import drive_main_flow


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_runs_the_real_model(llama_stack, make_user, login, page, artifacts_dir):
    user = make_user()
    login(llama_stack, user.username)
    result = drive_main_flow(
        page, llama_stack, prompt="The old lighthouse keeper opened the door and",
        artifacts=artifacts_dir, shot="workbench-real-model-n3.png",
    )  # fmt: skip
    assert all(line["model_checkpoint"] for line in result["lines"])
    assert any(text.strip() for text in result["texts"])
