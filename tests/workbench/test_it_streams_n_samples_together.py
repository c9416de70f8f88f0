"""On the real model, the n samples of a Workbench run stream together (the engine
batches them): all four have text before any of them is finished."""

import pytest

from engine.testing import run_engine
from tests.workbench.conftest import weft_stack
from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form

LIVE_COUNTS = """() => [0, 1, 2, 3].map(
    (i) => (document.querySelector(`.run pre[id$='-choice-${i}']`)?.textContent || "").length)"""


@pytest.fixture(scope="module")
def llama_stack(django_db_setup, tmp_path_factory):
    # A small per-token delay so the page can be looked at mid-stream.
    with run_engine("llama", max_logprobs=20, token_delay=0.04, startup_timeout=120) as engine_url:
        with weft_stack(engine_url, tmp_path_factory.mktemp("llama-n4")) as url:
            yield url


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_streams_n_samples_together(llama_stack, make_user, login, page, artifacts_dir):
    from playwright.sync_api import expect

    user = make_user()
    login(llama_stack, user.username)
    page.goto(f"{llama_stack}/workbench/")
    fill_run_form(page, prompt="The old lighthouse keeper opened the door and", n=4, max_tokens=64)
    page.locator("#id_seed").fill("11")
    page.locator("#run-btn").click()
    run = page.locator(".run").first
    page.wait_for_function(
        f"() => ({LIVE_COUNTS})().every((n) => n > 0)", timeout=WORKBENCH_TIMEOUT
    )
    counts = page.evaluate(LIVE_COUNTS)
    running = run.locator(".gen-state.state-running").count()
    # a little later, for the picture: all four have grown
    page.wait_for_function(
        f"() => ({LIVE_COUNTS})().every((n) => n >= 30)", timeout=WORKBENCH_TIMEOUT
    )
    page.screenshot(path=str(artifacts_dir / "workbench-n4-streaming-together.png"), full_page=True)
    later = page.evaluate(LIVE_COUNTS)
    expect(run.locator(".gen-state.state-done").first).to_be_visible(timeout=WORKBENCH_TIMEOUT)
    samples = run.locator(".gen-result .sample")
    expect(samples).to_have_count(4, timeout=WORKBENCH_TIMEOUT)
    finals = [len(samples.nth(i).get_attribute("data-text")) for i in range(4)]
    assert running == 1, counts
    # every sample had started, and none had finished, at the same moment
    assert all(0 < c < f for c, f in zip(counts, finals, strict=True)), (counts, finals)
    assert all(c < n for c, n in zip(counts, later, strict=True)), (counts, later)
