"""A run in progress survives a reload: the page shows it again with the text so far
and re-attaches to its stream (the text keeps growing, each token once and in order:
when the stream ends the live text is exactly the saved one), then shows the saved
result."""

import pytest

from completions.models import Generation
from tests.workbench.helpers import WORKBENCH_TIMEOUT, fill_run_form

# The live targets' text after every socket message of the reloaded page, from its
# first (the catch-up) to its last (the final state), before the saved result
# replaces them.
RECORD_LIVE_TEXT = """(gid) => document.addEventListener("htmx:wsAfterMessage", (event) => {
  const targets = [0, 1].map((i) => document.getElementById(`gen-${gid}-choice-${i}`));
  if (targets.every((el) => el)) window.liveText = targets.map((el) => el.textContent);
  if (event.detail.message.includes(`gen-${gid}-final`)) window.liveEnded = true;
})"""


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
    gid = int(run_id.removeprefix("run-"))
    page.add_init_script(f"({RECORD_LIVE_TEXT})({gid});")

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
    stored = [c["text"] for c in Generation.objects.get(pk=gid).choices]
    assert final.evaluate("el => el.textContent") == stored[0] and len(stored[0]) > len(before)
    # The re-attached live text was the whole text when the stream ended: neither the
    # tokens published between the last checkpoint and the socket's join missing, nor
    # those in both the checkpoint and the stream twice.
    page.wait_for_function("() => window.liveEnded === true", timeout=WORKBENCH_TIMEOUT)
    assert page.evaluate("() => window.liveText") == stored
