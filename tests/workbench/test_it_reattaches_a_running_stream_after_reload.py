"""A run in progress survives a reload: the page shows it again with the text so far
and re-attaches to its stream (the text keeps growing), then shows the saved result."""

import pytest

from completions.models import Generation
from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_reattaches_a_running_stream_after_reload(
    wb_stack, engine, make_user, login, page, artifacts_dir
):
    from playwright.sync_api import expect

    user = make_user()
    login(wb_stack["url"], user.username)
    engine.fault({"token_delay": 0.12})
    page.goto(f"{wb_stack['url']}/workbench/")
    fill_run_form(page, prompt="The long road", n=2, logprobs=2, max_tokens=60)
    page.locator("#run-btn").click()
    run = page.locator(".run").first
    live = run.locator("pre[id$='-choice-0']")
    expect(live.locator(".tok").nth(2)).to_be_attached(timeout=WORKBENCH_TIMEOUT)
    run_id = run.get_attribute("id")

    page.reload()
    run = page.locator(f"#{run_id}")
    expect(run.locator(".gen-state.state-running")).to_be_visible(timeout=WORKBENCH_TIMEOUT)
    live = run.locator("pre[id$='-choice-0']")
    expect(live.locator(".tok").first).to_be_attached(timeout=WORKBENCH_TIMEOUT)
    before = live.evaluate("el => el.textContent")
    # Still streaming into the re-attached targets.
    page.wait_for_function(
        "([el, n]) => el.textContent.length > n", arg=[live.element_handle(), len(before)],
        timeout=WORKBENCH_TIMEOUT,
    )  # fmt: skip
    assert run.locator(".gen-result .sample").count() == 0
    page.screenshot(path=str(artifacts_dir / "workbench-reattached-stream.png"))

    expect(run.locator(".gen-state.state-done")).to_be_visible(timeout=WORKBENCH_TIMEOUT)
    final = run.locator(".gen-result .sample").first.locator(".sample-text")
    # The saved result is the whole text. (The re-attached live text can miss the
    # tokens streamed between the last checkpoint and the socket's join — up to one
    # checkpoint interval — until the result replaces it: a known gap, see issue 14's
    # note; so the live text is not compared with the final one here.)
    stored = Generation.objects.get(pk=int(run_id.removeprefix("run-"))).choices[0]["text"]
    assert final.evaluate("el => el.textContent") == stored and len(stored) > len(before)
